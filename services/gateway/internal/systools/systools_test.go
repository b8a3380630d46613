package systools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newWorkspace opens a workspace in a fresh directory (created by New) and
// returns it with an "outside" directory next to it holding secret.txt.
func newWorkspace(t *testing.T) (w *Workspace, outside string) {
	t.Helper()
	base := t.TempDir()
	outside = filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := New(filepath.Join(base, "ws", "nested"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, outside
}

// mustErr checks that err is an error whose message holds every want.
func mustErr(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one saying %q", what, want)
	}
	for _, s := range want {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: error %q does not say %q", what, err, s)
		}
	}
}

func TestNewCreatesPrivateDir(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	st, err := os.Stat(w.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("workspace %s: mode %v, want a 0700 directory", w.Dir(), st.Mode())
	}
	if _, err := New(" "); err == nil {
		t.Error("New(\" \"): no error")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(file); err == nil {
		t.Errorf("New(%s), a file: no error", file)
	}
}

func TestWriteRead(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	r, err := w.Write("notes/day/a.txt", "hello\n", false)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Created || r.Bytes != 6 || r.Size != 6 || r.Path != "notes/day/a.txt" {
		t.Errorf("Write = %+v, want created, 6 bytes", r)
	}
	if b, err := os.ReadFile(filepath.Join(w.Dir(), "notes", "day", "a.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("file on disk = %q, %v", b, err)
	}
	if r, err = w.Write("notes/day/a.txt", "world\n", true); err != nil || r.Created || !r.Appended || r.Size != 12 {
		t.Fatalf("append = %+v, %v; want size 12, not created", r, err)
	}
	got, err := w.Read("notes/day/a.txt", 0, 0)
	if err != nil || got.Content != "hello\nworld\n" || got.Clipped || got.Size != 12 {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	if r, err = w.Write("notes/day/a.txt", "new", false); err != nil || r.Size != 3 {
		t.Fatalf("overwrite = %+v, %v; want size 3", r, err)
	}
	if got, _ := w.Read("./notes//day/../day/a.txt", 0, 0); got.Content != "new" {
		t.Errorf("Read after overwrite (unclean path) = %q, want new", got.Content)
	}

	// Errors name the path and what was wrong.
	_, err = w.Read("notes/b.txt", 0, 0)
	mustErr(t, "read missing", err, "notes/b.txt", "no such file or directory in the workspace")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read missing: %v is not fs.ErrNotExist", err)
	}
	_, err = w.Read("notes", 0, 0)
	mustErr(t, "read dir", err, "notes", "is a directory")
	_, err = w.Write("notes", "x", false)
	mustErr(t, "write onto dir", err, "notes", "is a directory")
	_, err = w.Write("notes/day/a.txt/x", "x", false)
	mustErr(t, "write under a file", err, "not a directory")
	_, err = w.Read("", 0, 0)
	mustErr(t, "read empty path", err, "path is required")
	_, err = w.Write(".", "x", false)
	mustErr(t, "write workspace", err, "workspace itself")
	_, err = w.Read("notes/day/a.txt", -1, 0)
	mustErr(t, "negative offset", err, "offset -1 is negative")
	_, err = w.Read("notes/day/a.txt", 4, 0)
	mustErr(t, "offset past end", err, "offset 4 is past the end of the file (3 bytes)")
	if got, err := w.Read("notes/day/a.txt", 3, 0); err != nil || got.Content != "" {
		t.Errorf("read at the end = %+v, %v; want empty", got, err)
	}
}

func TestReadClipsAndRefusesBinary(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	// A 1.5 MiB file of "é" (2 bytes each) after one byte: MaxRead cuts
	// inside a character, so the piece ends one byte early.
	big := "x" + strings.Repeat("é", 3<<18)
	if _, err := w.Write("big.txt", big, false); err != nil {
		t.Fatal(err)
	}
	r, err := w.Read("big.txt", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Clipped || len(r.Content) != MaxRead-1 || r.Next != MaxRead-1 || r.Size != int64(len(big)) {
		t.Fatalf("Read = clipped %v, %d bytes, next %d, size %d; want clipped at %d", r.Clipped, len(r.Content), r.Next, r.Size, MaxRead-1)
	}
	rest, err := w.Read("big.txt", r.Next, 0)
	if err != nil || rest.Clipped || r.Content+rest.Content != big {
		t.Fatalf("read on from %d: clipped %v, %v; the pieces do not add up to the file", r.Next, rest.Clipped, err)
	}
	// A limit above MaxRead is MaxRead; a small one clips.
	if r, _ := w.Read("big.txt", 0, 10<<20); len(r.Content) != MaxRead-1 {
		t.Errorf("limit 10 MiB read %d bytes, want %d", len(r.Content), MaxRead-1)
	}
	if r, _ := w.Read("big.txt", 1, 4); r.Content != "éé" || r.Next != 5 {
		t.Errorf("Read(1, 4) = %q next %d, want éé next 5", r.Content, r.Next)
	}
	_, err = w.Read("big.txt", 2, 4)
	mustErr(t, "offset inside a character", err, "offset 2 is inside a UTF-8 character")

	if err := os.WriteFile(filepath.Join(w.Dir(), "img.png"), []byte{0x89, 'P', 'N', 'G', 0, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = w.Read("img.png", 0, 0)
	mustErr(t, "binary", err, "img.png", "not a UTF-8 text file")
	if err := os.WriteFile(filepath.Join(w.Dir(), "nul.txt"), []byte("a\x00b"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = w.Read("nul.txt", 0, 0)
	mustErr(t, "NUL byte", err, "not a UTF-8 text file")
}

func TestWriteLimit(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	_, err := w.Write("huge.txt", strings.Repeat("a", MaxWrite+1), false)
	mustErr(t, "write over MaxWrite", err, "huge.txt", fmt.Sprintf("content is %d bytes", MaxWrite+1), "10 MiB")
	if _, err := os.Stat(filepath.Join(w.Dir(), "huge.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused write left a file: %v", err)
	}
	if r, err := w.Write("max.txt", strings.Repeat("a", MaxWrite), false); err != nil || r.Size != MaxWrite {
		t.Errorf("write of exactly MaxWrite = %+v, %v", r, err)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	w, outside := newWorkspace(t)
	for _, f := range []string{"b.txt", "a/x.txt"} {
		if _, err := w.Write(f, "12345", false); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(w.Dir(), "c-link")); err != nil {
		t.Fatal(err)
	}
	r, err := w.List("")
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{Name: "a", Type: "dir"}, {Name: "b.txt", Type: "file", Size: 5}, {Name: "c-link", Type: "symlink", Target: outside}}
	if len(r.Entries) != len(want) || r.Total != 3 || r.Clipped {
		t.Fatalf("List = %+v, want %v", r, want)
	}
	for i, e := range r.Entries {
		if e.Name != want[i].Name || e.Type != want[i].Type || e.Target != want[i].Target || (e.Type == "file" && e.Size != 5) || e.ModTime.IsZero() {
			t.Errorf("entry %d = %+v, want %+v", i, e, want[i])
		}
	}
	if r, err := w.List("a"); err != nil || len(r.Entries) != 1 || r.Entries[0].Name != "x.txt" || r.Path != "a" {
		t.Errorf("List(a) = %+v, %v", r, err)
	}
	_, err = w.List("b.txt")
	mustErr(t, "list a file", err, "b.txt", "is not a directory")
	_, err = w.List("nope")
	mustErr(t, "list missing", err, "nope", "no such file or directory")
}

func TestListLimit(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	for i := range MaxList + 5 {
		if err := os.WriteFile(filepath.Join(w.Dir(), fmt.Sprintf("f%04d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := w.List(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Entries) != MaxList || r.Total != MaxList+5 || !r.Clipped || r.Entries[MaxList-1].Name != fmt.Sprintf("f%04d", MaxList-1) {
		t.Errorf("List = %d entries, total %d, clipped %v; want the first %d of %d", len(r.Entries), r.Total, r.Clipped, MaxList, MaxList+5)
	}
}

func TestMkdirDelete(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	if created, err := w.Mkdir("a/b/c"); err != nil || !created {
		t.Fatalf("Mkdir = %v, %v", created, err)
	}
	if created, err := w.Mkdir("a/b"); err != nil || created {
		t.Errorf("Mkdir of an existing dir = %v, %v; want no error, not created", created, err)
	}
	if _, err := w.Write("a/b/f.txt", "x", false); err != nil {
		t.Fatal(err)
	}
	_, err := w.Mkdir("a/b/f.txt")
	mustErr(t, "mkdir over a file", err, "a/b/f.txt", "already exists and is not a directory")

	_, err = w.Delete("a", false)
	mustErr(t, "delete non-empty dir", err, "a", "not empty", "recursive")
	if k, err := w.Delete("a/b/f.txt", false); err != nil || k != "file" {
		t.Errorf("delete file = %q, %v", k, err)
	}
	if k, err := w.Delete("a/b/c", false); err != nil || k != "dir" {
		t.Errorf("delete empty dir = %q, %v", k, err)
	}
	if _, err := w.Write("a/b/g.txt", "x", false); err != nil {
		t.Fatal(err)
	}
	if k, err := w.Delete("a", true); err != nil || k != "dir" {
		t.Errorf("delete recursive = %q, %v", k, err)
	}
	if _, err := os.Stat(filepath.Join(w.Dir(), "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a still exists: %v", err)
	}
	_, err = w.Delete("a", true)
	mustErr(t, "delete missing", err, "a", "no such file or directory in the workspace")
	for _, p := range []string{".", "", "x/.."} {
		_, err = w.Delete(p, true)
		if err == nil {
			t.Errorf("Delete(%q): no error", p)
		}
	}
	_, err = w.Delete(".", true)
	mustErr(t, "delete workspace", err, "workspace itself")
	if _, err := os.Stat(w.Dir()); err != nil {
		t.Errorf("workspace gone: %v", err)
	}
}

// TestEscapes tries every way out of the workspace with every operation.
func TestEscapes(t *testing.T) {
	t.Parallel()
	w, outside := newWorkspace(t)
	secret := filepath.Join(outside, "secret.txt")
	links := map[string]string{
		"link":     outside,                      // a directory outside, absolute
		"rel":      "../../outside",              // the same, relative
		"flink":    secret,                       // a file outside
		"in/deep":  outside,                      // a link in the middle of a path
		"selfabs":  filepath.Join(w.Dir(), "in"), // absolute, even to inside: os.Root refuses absolute links
		"loop":     "loop",
		"in/uplnk": "..", // stays inside: allowed
	}
	if err := os.Mkdir(filepath.Join(w.Dir(), "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(w.Dir(), name)); err != nil {
			t.Fatal(err)
		}
	}
	escapes := []string{
		"../outside/secret.txt", "in/../../outside/secret.txt", "..", secret, "/etc/passwd",
		"link/secret.txt", "rel/secret.txt", "flink", "in/deep/secret.txt", "selfabs/x",
	}
	for _, p := range escapes {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, ErrEscape) {
				t.Errorf("%s(%q) = %v, want an escape error", op, p, err)
			}
		}
		_, err := w.Read(p, 0, 0)
		check("Read", err)
		_, err = w.Write(p, "pwned", false)
		check("Write", err)
		_, err = w.Write(p+"-new", "pwned", false)
		if p != "flink" && p != "/etc/passwd" && p != secret && p != ".." { // flink-new, /etc/passwd-new, .../secret.txt-new and ..-new are other names
			check("Write new", err)
		}
		_, err = w.Mkdir(p + "/sub")
		check("Mkdir", err)
		if p != "flink" { // deleting the link itself is fine (below)
			_, err = w.Delete(p, true)
			check("Delete", err)
		}
	}
	for _, p := range []string{"..", "link", "rel", "in/deep", "../outside", "/tmp"} {
		if _, err := w.List(p); !errors.Is(err, ErrEscape) {
			t.Errorf("List(%q) = %v, want an escape error", p, err)
		}
	}
	// The messages say what was wrong.
	_, err := w.Read("../x", 0, 0)
	mustErr(t, "read ../x", err, "path escapes the workspace: ../x")
	_, err = w.Read("/etc/passwd", 0, 0)
	mustErr(t, "read /etc/passwd", err, "path must be relative to the workspace, not absolute: /etc/passwd")
	_, err = w.Read("link/secret.txt", 0, 0)
	mustErr(t, "read link/secret.txt", err, "path escapes the workspace (through a symbolic link or ..): link/secret.txt")
	_, err = w.Read("loop", 0, 0)
	mustErr(t, "read loop", err, "loop")

	// Nothing outside changed.
	if b, err := os.ReadFile(secret); err != nil || string(b) != "top secret" {
		t.Fatalf("outside secret = %q, %v", b, err)
	}
	if des, _ := os.ReadDir(outside); len(des) != 1 {
		t.Fatalf("outside holds %d entries, want only secret.txt", len(des))
	}

	// A link that stays inside is followed; deleting a link that points
	// out removes the link, not its target.
	if _, err := w.Write("in/uplnk/inside.txt", "ok", false); err != nil {
		t.Errorf("write through a link that stays inside: %v", err)
	}
	if r, err := w.Read("inside.txt", 0, 0); err != nil || r.Content != "ok" {
		t.Errorf("read inside.txt = %+v, %v", r, err)
	}
	for _, l := range []string{"flink", "link"} {
		if k, err := w.Delete(l, true); err != nil || k != "symlink" {
			t.Errorf("Delete(%s) = %q, %v; want the link removed", l, k, err)
		}
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "top secret" {
		t.Fatalf("outside secret after deleting the links = %q, %v", b, err)
	}
}
