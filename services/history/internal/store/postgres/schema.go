package postgres

// migrations are the schema versions in order; migrations[i] makes version
// i+1. Each runs in its own transaction with its row in schema_migrations,
// under the migration advisory lock.
var migrations = [][]string{
	// 1: the tables. Ids sort bytewise (COLLATE "C") whatever the
	// database's collation, so keyset cursors compare the same way
	// everywhere.
	{
		`CREATE TABLE audit (
			seq             bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			id              text    COLLATE "C" NOT NULL UNIQUE,
			time_unix_nano  bigint  NOT NULL,
			caller          text    NOT NULL DEFAULT '',
			mcp_session     text    NOT NULL DEFAULT '',
			browser_session text    NOT NULL DEFAULT '',
			tool            text    NOT NULL DEFAULT '',
			arguments       text    NOT NULL DEFAULT '',
			result          text    NOT NULL DEFAULT '',
			duration_micros bigint  NOT NULL DEFAULT 0,
			outcome         text    NOT NULL DEFAULT 'unspecified'
				CHECK (outcome IN ('ok', 'error', 'denied', 'timeout', 'unspecified')),
			trace_id        text    NOT NULL DEFAULT '',
			source          text    NOT NULL DEFAULT '',
			client          text    NOT NULL DEFAULT '',
			arguments_chars integer NOT NULL DEFAULT 0,
			result_chars    integer NOT NULL DEFAULT 0
		)`,
		`CREATE INDEX audit_time ON audit (time_unix_nano, id)`,
		`CREATE TABLE chat_sessions (
			id         text   COLLATE "C" PRIMARY KEY,
			title      text   NOT NULL DEFAULT '',
			created_at bigint NOT NULL,
			updated_at bigint NOT NULL
		)`,
		`CREATE INDEX chat_sessions_updated ON chat_sessions (updated_at, id)`,
		`CREATE TABLE chat_messages (
			id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			session_id   text   COLLATE "C" NOT NULL REFERENCES chat_sessions (id) ON DELETE CASCADE,
			role         text   NOT NULL,
			content      text   NOT NULL DEFAULT '',
			tool_calls   text   NOT NULL DEFAULT '',
			tool_call_id text   NOT NULL DEFAULT '',
			created_at   bigint NOT NULL
		)`,
		`CREATE INDEX chat_messages_session ON chat_messages (session_id, id)`,
	},
	// 2: filter indexes and text search: trigram GIN indexes serve ILIKE
	// '%text%' on arguments and on result.
	{
		`CREATE INDEX audit_browser_session ON audit (browser_session, time_unix_nano, id)`,
		`CREATE INDEX audit_mcp_session ON audit (mcp_session, time_unix_nano, id)`,
		`CREATE INDEX audit_tool ON audit (tool, time_unix_nano, id)`,
		`CREATE INDEX audit_caller ON audit (caller, time_unix_nano, id)`,
		`CREATE INDEX audit_errors ON audit (time_unix_nano, id) WHERE outcome <> 'ok'`,
		`CREATE EXTENSION IF NOT EXISTS pg_trgm`,
		`CREATE INDEX audit_arguments_trgm ON audit USING gin (arguments gin_trgm_ops)`,
		`CREATE INDEX audit_result_trgm ON audit USING gin (result gin_trgm_ops)`,
	},
	// 3: how a person decided a monitored call: JSON (see
	// store.ApprovalJSON), NULL for calls that needed no approval and for
	// the records stored before this version.
	{
		`ALTER TABLE audit ADD COLUMN approval text`,
	},
}
