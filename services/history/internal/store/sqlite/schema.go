package sqlite

// migrations are the schema versions in order; migrations[i] makes version
// i+1. Each runs in its own transaction with its row in schema_migrations.
var migrations = [][]string{
	// 1: the tables.
	{
		`CREATE TABLE audit (
			seq             INTEGER PRIMARY KEY AUTOINCREMENT,
			id              TEXT    NOT NULL UNIQUE,
			time_unix_nano  INTEGER NOT NULL,
			caller          TEXT    NOT NULL DEFAULT '',
			mcp_session     TEXT    NOT NULL DEFAULT '',
			browser_session TEXT    NOT NULL DEFAULT '',
			tool            TEXT    NOT NULL DEFAULT '',
			arguments       TEXT    NOT NULL DEFAULT '',
			result          TEXT    NOT NULL DEFAULT '',
			duration_micros INTEGER NOT NULL DEFAULT 0,
			outcome         TEXT    NOT NULL DEFAULT 'unspecified'
				CHECK (outcome IN ('ok', 'error', 'denied', 'timeout', 'unspecified')),
			trace_id        TEXT    NOT NULL DEFAULT '',
			source          TEXT    NOT NULL DEFAULT '',
			client          TEXT    NOT NULL DEFAULT '',
			arguments_chars INTEGER NOT NULL DEFAULT 0,
			result_chars    INTEGER NOT NULL DEFAULT 0
		)`,
		`CREATE INDEX audit_time ON audit (time_unix_nano, id)`,
		`CREATE TABLE chat_sessions (
			id         TEXT    PRIMARY KEY,
			title      TEXT    NOT NULL DEFAULT '',
			created_at INTEGER NOT NULL,
			updated_at INTEGER NOT NULL
		)`,
		`CREATE INDEX chat_sessions_updated ON chat_sessions (updated_at, id)`,
		`CREATE TABLE chat_messages (
			id           INTEGER PRIMARY KEY AUTOINCREMENT,
			session_id   TEXT    NOT NULL REFERENCES chat_sessions (id) ON DELETE CASCADE,
			role         TEXT    NOT NULL,
			content      TEXT    NOT NULL DEFAULT '',
			tool_calls   TEXT    NOT NULL DEFAULT '',
			tool_call_id TEXT    NOT NULL DEFAULT '',
			created_at   INTEGER NOT NULL
		)`,
		`CREATE INDEX chat_messages_session ON chat_messages (session_id, id)`,
	},
	// 2: filter indexes and text search. audit_fts is an external-content
	// FTS5 table (the text stays in audit) with the trigram tokenizer and
	// no positions (detail=none: half the cost of indexing); a text filter
	// asks it for the records that hold every trigram of the text and
	// checks the substring on those (see textMatch). InsertAudit indexes a
	// batch with one INSERT … SELECT after storing it, not with a per-row
	// trigger: FTS5 writes its pending terms out as a new segment at every
	// statement of a transaction that touches it, so a trigger would make
	// a segment per record and merging them would cost ten times the
	// insert. automerge=16 merges segments less eagerly (fewer rewrites,
	// more segments to read per query). Deletes and updates follow by
	// trigger.
	{
		`CREATE INDEX audit_browser_session ON audit (browser_session, time_unix_nano, id)`,
		`CREATE INDEX audit_mcp_session ON audit (mcp_session, time_unix_nano, id)`,
		`CREATE INDEX audit_tool ON audit (tool, time_unix_nano, id)`,
		`CREATE INDEX audit_caller ON audit (caller, time_unix_nano, id)`,
		`CREATE INDEX audit_errors ON audit (time_unix_nano, id) WHERE outcome <> 'ok'`,
		`CREATE VIRTUAL TABLE audit_fts USING fts5(arguments, result,
			content = 'audit', content_rowid = 'seq', tokenize = 'trigram', detail = none)`,
		`INSERT INTO audit_fts (audit_fts, rank) VALUES ('automerge', 16)`,
		`CREATE TRIGGER audit_fts_delete AFTER DELETE ON audit BEGIN
			INSERT INTO audit_fts (audit_fts, rowid, arguments, result) VALUES ('delete', old.seq, old.arguments, old.result);
		END`,
		`CREATE TRIGGER audit_fts_update AFTER UPDATE OF arguments, result ON audit BEGIN
			INSERT INTO audit_fts (audit_fts, rowid, arguments, result) VALUES ('delete', old.seq, old.arguments, old.result);
			INSERT INTO audit_fts (rowid, arguments, result) VALUES (new.seq, new.arguments, new.result);
		END`,
		// Index the records stored before this version.
		`INSERT INTO audit_fts (audit_fts) VALUES ('rebuild')`,
	},
	// 3: how a person decided a monitored call: JSON (see
	// store.ApprovalJSON), NULL for calls that needed no approval and for
	// the records stored before this version.
	{
		`ALTER TABLE audit ADD COLUMN approval TEXT`,
	},
}
