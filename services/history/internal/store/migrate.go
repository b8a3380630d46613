package store

// LatestSchema is the schema version every backend migrates to at Open:
// 1 is the tables, 2 the filter indexes and text search, 3 the approval
// column of the audit table.
const LatestSchema = 3

// ApprovalSchema is the first schema version with the audit table's
// approval column: a store opened at an older version (tests of upgrades)
// neither writes nor reads it.
const ApprovalSchema = 3
