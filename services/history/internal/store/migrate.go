package store

// LatestSchema is the schema version every backend migrates to at Open:
// 1 is the tables, 2 the filter indexes and text search.
const LatestSchema = 2
