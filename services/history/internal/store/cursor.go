package store

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// Cursor kinds, so that a cursor of one listing is refused by another.
const (
	cursorAudit = "a"
	cursorChat  = "c"
)

// encodeCursor makes the opaque cursor of a keyset position (a time or
// update stamp and an id).
func encodeCursor(kind string, at int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + strconv.FormatInt(at, 10) + ":" + id))
}

// decodeCursor reverses encodeCursor; anything else is ErrInvalid.
func decodeCursor(kind, cursor string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || !strings.HasPrefix(string(b), kind) {
		return 0, "", fmt.Errorf("%w: bad cursor", ErrInvalid)
	}
	at, id, ok := strings.Cut(string(b[len(kind):]), ":")
	if !ok || id == "" {
		return 0, "", fmt.Errorf("%w: bad cursor", ErrInvalid)
	}
	n, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("%w: bad cursor", ErrInvalid)
	}
	return n, id, nil
}

// AuditCursor is the cursor after the record at (timeUnixNano, id).
func AuditCursor(timeUnixNano int64, id string) string {
	return encodeCursor(cursorAudit, timeUnixNano, id)
}

// ParseAuditCursor decodes an AuditCursor.
func ParseAuditCursor(cursor string) (timeUnixNano int64, id string, err error) {
	return decodeCursor(cursorAudit, cursor)
}

// ChatCursor is the cursor after the chat session updated at
// updatedUnixMilli with id.
func ChatCursor(updatedUnixMilli int64, id string) string {
	return encodeCursor(cursorChat, updatedUnixMilli, id)
}

// ParseChatCursor decodes a ChatCursor.
func ParseChatCursor(cursor string) (updatedUnixMilli int64, id string, err error) {
	return decodeCursor(cursorChat, cursor)
}
