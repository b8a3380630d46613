package profiles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestFilter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		keep bool
		why  string
	}{
		// Login state and settings: kept.
		{"Local State", true, ""},
		{"Default", true, ""},
		{"Default/", true, ""},
		{"./Default/Cookies", true, ""},
		{"Default/Cookies-journal", true, ""},
		{"Default/Network/Cookies", true, ""},
		{"Default/Local Storage/leveldb/000003.log", true, ""},
		{"Default/IndexedDB/https_example.com_0.indexeddb.leveldb/MANIFEST-000001", true, ""},
		{"Default/Login Data", true, ""},
		{"Default/Web Data", true, ""},
		{"Default/Preferences", true, ""},
		{"Default/Secure Preferences", true, ""},
		{"Default/Extension State/000003.log", true, ""},
		{"Default/Local Extension Settings/abc/000003.log", true, ""},
		{"Profile 1/Cookies", true, ""},
		{"Default/Service Worker/Database/000001.log", true, ""},
		// Unknown entries: kept.
		{"Default/Something New", true, ""},
		{"notes.txt", true, ""},
		{"Other/History", true, ""}, // not a profile directory
		// Caches, at any depth.
		{"Default/Cache", false, WhyCache},
		{"Default/Cache/Cache_Data/data_0", false, WhyCache},
		{"Default/Code Cache/js/index", false, WhyCache},
		{"Default/GPUCache/index", false, WhyCache},
		{"GrShaderCache/data_0", false, WhyCache},
		{"ShaderCache", false, WhyCache},
		{"GraphiteDawnCache/index", false, WhyCache},
		{"Default/DawnCache/index", false, WhyCache},
		{"Default/Service Worker/CacheStorage/abc/index", false, WhyCache},
		{"Default/Service Worker/ScriptCache/index", false, WhyCache},
		{"Default/Storage/ext/abc/def/GPUCache/index", false, WhyCache},
		{"component_crx_cache/x.crx", false, WhyCache},
		{"Default/blob_storage/uuid", false, WhyCache},
		// Crash reports.
		{"Crashpad/settings.dat", false, WhyCrash},
		{"Crash Reports", false, WhyCrash},
		// History and telemetry.
		{"Default/History", false, WhyHistory},
		{"Default/History-journal", false, WhyHistory},
		{"Default/Visited Links", false, WhyHistory},
		{"Default/Top Sites", false, WhyHistory},
		{"Default/Favicons-journal", false, WhyHistory},
		{"Default/Shortcuts", false, WhyHistory},
		{"Default/Network Action Predictor", false, WhyHistory},
		{"Profile 2/History", false, WhyHistory},
		{"BrowserMetrics/BrowserMetrics-1.pma", false, WhyTelemetry},
		{"BrowserMetrics-spare.pma", false, WhyTelemetry},
		{"optimization_guide_model_store/x", false, WhyTelemetry},
		{"Default/optimization_guide_hint_cache_store/x", false, WhyTelemetry},
		{"Safe Browsing/UrlSoceng.store", false, WhyTelemetry},
		{"Default/Safe Browsing Network/x", false, WhyTelemetry},
		{"Default/Network/Reporting and NEL", false, WhyTelemetry},
		{"Default/Download Service/EntryDB/x", false, WhyCache},
		// Session restore.
		{"Default/Sessions/Session_1", false, WhySession},
		{"Default/Sessions_Encrypted/Tabs_1", false, WhySession},
		{"GPUPersistentCache/GPUCache/x/cache.db", false, WhyCache},
		{"Default/Segmentation Platform/SignalDB/000003.log", false, WhyTelemetry},
		{"Default/Current Session", false, WhySession},
		{"Default/Current Tabs", false, WhySession},
		{"Default/Last Session", false, WhySession},
		{"Default/Last Tabs", false, WhySession},
		{"Default/Session Storage/000003.log", false, WhySession},
		// DRM, locks, logs, component downloads.
		{"WidevineCdm/4.10/manifest.json", false, WhyDRM},
		{"SingletonLock", false, WhyLock},
		{"SingletonCookie", false, WhyLock},
		{"SingletonSocket", false, WhyLock},
		{"lockfile", false, WhyLock},
		{"Default/Local Storage/leveldb/LOCK", false, WhyLock},
		{"Default/Local Storage/leveldb/LOG", false, WhyLog},
		{"Default/Local Storage/leveldb/LOG.old", false, WhyLog},
		{"OnDeviceHeadSuggestModel/1/model.tflite", false, WhyComponent},
		{"CertificateRevocation/1/crl-set", false, WhyComponent},
	} {
		t.Run(tc.path, func(t *testing.T) {
			keep, why := Filter(tc.path)
			if keep != tc.keep || why != tc.why {
				t.Errorf("Filter(%q) = %v, %q; want %v, %q", tc.path, keep, why, tc.keep, tc.why)
			}
		})
	}
}

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name     string
	typ      byte
	body     string
	size     int64 // for TypeReg when body is empty and size is set: size zero bytes
	linkname string
}

func file(name, body string) tarEntry { return tarEntry{name: name, typ: tar.TypeReg, body: body} }
func dir(name string) tarEntry        { return tarEntry{name: name, typ: tar.TypeDir} }

// archive builds a tar.gz of entries.
func archive(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Linkname: e.linkname}
		var body io.Reader = strings.NewReader(e.body)
		switch {
		case e.typ == tar.TypeReg && e.size > 0:
			h.Size, body = e.size, io.LimitReader(zeros{}, e.size)
		case e.typ == tar.TypeReg:
			h.Size = int64(len(e.body))
		case e.typ == tar.TypeDir:
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := io.Copy(tw, body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// listArchive returns the entry names of a tar.gz.
func listArchive(t *testing.T, b []byte) []string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// listDir returns the relative paths under dir ("/"-separated, dirs with a
// trailing /).
func listDir(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sample is a raw profile: login state, and entries the filter drops.
func sample(t *testing.T) []byte {
	return archive(t,
		dir("./"),
		file("./Local State", `{"os_crypt":{}}`),
		dir("./Default/"),
		file("./Default/Cookies", "cookie db"),
		file("./Default/Preferences", "{}"),
		dir("./Default/Local Storage/"),
		dir("./Default/Local Storage/leveldb/"),
		file("./Default/Local Storage/leveldb/000003.log", "ls"),
		file("./Default/Local Storage/leveldb/LOCK", ""),
		dir("./Default/Cache/"),
		file("./Default/Cache/data_0", "cached"),
		file("./Default/History", "visits"),
		dir("./Default/Sessions/"),
		file("./Default/Sessions/Session_1", "tabs"),
		dir("./Crashpad/"),
		file("./Crashpad/report", "crash"),
		file("./Default/Something New", "unknown"),
	)
}

var sampleKept = []string{"Default/", "Default/Cookies", "Default/Local Storage/", "Default/Local Storage/leveldb/",
	"Default/Local Storage/leveldb/000003.log", "Default/Preferences", "Default/Something New", "Local State"}

func TestUnpack(t *testing.T) {
	t.Parallel()
	d := t.TempDir()
	st, err := Unpack(bytes.NewReader(sample(t)), d, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, d); !slices.Equal(got, sampleKept) {
		t.Errorf("unpacked %q, want %q", got, sampleKept)
	}
	want := Stats{Files: 5, Dirs: 3, Bytes: int64(len(`{"os_crypt":{}}` + "cookie db{}lsunknown")), Dropped: 8,
		DroppedBytes: int64(len("cachedvisitstabscrash"))}
	if st.Files != want.Files || st.Dirs != want.Dirs || st.Bytes != want.Bytes || st.Dropped != want.Dropped ||
		st.DroppedBytes != want.DroppedBytes || st.Skipped != 0 {
		t.Errorf("stats = %+v, want %+v", st, want)
	}
	b, err := os.ReadFile(filepath.Join(d, "Default", "Cookies"))
	if err != nil || string(b) != "cookie db" {
		t.Errorf("Default/Cookies = %q, %v", b, err)
	}
	fi, err := os.Stat(filepath.Join(d, "Default", "Cookies"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("Default/Cookies mode = %v, %v; want 0600", fi.Mode(), err)
	}
}

func TestUnpackUnsafePath(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"../evil", "/etc/evil", "Default/../../evil", "..", "./../evil"} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			d := filepath.Join(parent, "profile")
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
			a := archive(t, file("Default/Cookies", "c"), file(name, "pwned"))
			_, err := Unpack(bytes.NewReader(a), d, Limits{})
			if !errors.Is(err, ErrUnsafePath) || !strings.Contains(err.Error(), name) {
				t.Fatalf("Unpack(entry %q) = %v, want ErrUnsafePath naming it", name, err)
			}
			if Status(err) != http.StatusBadRequest {
				t.Errorf("Status(%v) = %d, want 400", err, Status(err))
			}
			if _, err := os.Stat(filepath.Join(parent, "evil")); !os.IsNotExist(err) {
				t.Errorf("%s/evil exists after the unpack: %v", parent, err)
			}
			// Normalize refuses it too: nothing of it is ever stored.
			if _, err := Normalize(bytes.NewReader(a), io.Discard, Limits{}); !errors.Is(err, ErrUnsafePath) {
				t.Errorf("Normalize(entry %q) = %v, want ErrUnsafePath", name, err)
			}
		})
	}
}

func TestUnpackSkipsSpecialEntries(t *testing.T) {
	t.Parallel()
	d := t.TempDir()
	a := archive(t,
		file("Default/Cookies", "c"),
		tarEntry{name: "Default/passwd", typ: tar.TypeSymlink, linkname: "/etc/passwd"},
		tarEntry{name: "Default/escape", typ: tar.TypeSymlink, linkname: "../../../../tmp"},
		tarEntry{name: "Default/hard", typ: tar.TypeLink, linkname: "Default/Cookies"},
		tarEntry{name: "Default/fifo", typ: tar.TypeFifo},
		tarEntry{name: "Default/dev", typ: tar.TypeChar},
		file("Default/escape/x", "through the symlink"), // must land in a real directory
	)
	st, err := Unpack(bytes.NewReader(a), d, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	wantSkipped := []string{"Default/passwd", "Default/escape", "Default/hard", "Default/fifo", "Default/dev"}
	if st.Skipped != 5 || !slices.Equal(st.SkippedNames, wantSkipped) {
		t.Errorf("skipped %d %q, want 5 %q", st.Skipped, st.SkippedNames, wantSkipped)
	}
	want := []string{"Default/", "Default/Cookies", "Default/escape/", "Default/escape/x"}
	if got := listDir(t, d); !slices.Equal(got, want) {
		t.Errorf("unpacked %q, want %q", got, want)
	}
	fi, err := os.Lstat(filepath.Join(d, "Default", "escape"))
	if err != nil || !fi.IsDir() {
		t.Errorf("Default/escape = %v, %v; want a plain directory", fi, err)
	}
}

func TestPackSkipsSpecialFiles(t *testing.T) {
	t.Parallel()
	d := t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "Default"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "Default", "Cookies"), []byte("c"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(d, "Default", "passwd")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(d, "Default", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st, err := Pack(d, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped != 2 {
		t.Errorf("skipped %d (%q), want 2", st.Skipped, st.SkippedNames)
	}
	if got, want := listArchive(t, buf.Bytes()), []string{"Default/", "Default/Cookies"}; !slices.Equal(got, want) {
		t.Errorf("packed %q, want %q", got, want)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	noise := make([]byte, 64<<10)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	many := []tarEntry{}
	for i := range 3000 {
		many = append(many, file("Default/f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("y", i/26), ""))
	}
	for _, tc := range []struct {
		name    string
		archive []byte
		lim     Limits
		msg     string
	}{
		{"upload", archive(t, file("Default/Cookies", string(noise))), Limits{MaxUpload: 32 << 10}, "SOVEREIGN_PROFILE_MAX_UPLOAD_MB"},
		{"unpacked", archive(t, file("Default/Cookies", "c"), tarEntry{name: "Default/big", typ: tar.TypeReg, size: 2 << 20}),
			Limits{MaxUnpacked: 1 << 20}, "SOVEREIGN_PROFILE_MAX_UNPACKED_MB"},
		// Dropped content is read too, so it counts.
		{"unpacked-dropped", archive(t, tarEntry{name: "Default/Cache/big", typ: tar.TypeReg, size: 2 << 20}),
			Limits{MaxUnpacked: 1 << 20}, "SOVEREIGN_PROFILE_MAX_UNPACKED_MB"},
		// 3000 empty files cost 3000 headers: 1.5 MB.
		{"entries", archive(t, many...), Limits{MaxUnpacked: 1 << 20}, "SOVEREIGN_PROFILE_MAX_UNPACKED_MB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			_, err := Unpack(bytes.NewReader(tc.archive), d, tc.lim)
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Unpack = %v, want ErrTooLarge naming %s", err, tc.msg)
			}
			if Status(err) != http.StatusRequestEntityTooLarge {
				t.Errorf("Status(%v) = %d, want 413", err, Status(err))
			}
			if _, err := Normalize(bytes.NewReader(tc.archive), io.Discard, tc.lim); !errors.Is(err, ErrTooLarge) {
				t.Errorf("Normalize = %v, want ErrTooLarge", err)
			}
			// Within default limits the same archive is fine.
			if _, err := Unpack(bytes.NewReader(tc.archive), t.TempDir(), Limits{}); err != nil {
				t.Errorf("Unpack with default limits: %v", err)
			}
		})
	}
}

func TestLimitsFromEnv(t *testing.T) {
	t.Setenv("SOVEREIGN_PROFILE_MAX_UPLOAD_MB", "")
	t.Setenv("SOVEREIGN_PROFILE_MAX_UNPACKED_MB", "")
	if l, err := LimitsFromEnv(); err != nil || l.MaxUpload != 200<<20 || l.MaxUnpacked != 500<<20 {
		t.Errorf("LimitsFromEnv() = %+v, %v; want 200 MiB, 500 MiB", l, err)
	}
	t.Setenv("SOVEREIGN_PROFILE_MAX_UPLOAD_MB", "7")
	t.Setenv("SOVEREIGN_PROFILE_MAX_UNPACKED_MB", "9")
	if l, err := LimitsFromEnv(); err != nil || l.MaxUpload != 7<<20 || l.MaxUnpacked != 9<<20 {
		t.Errorf("LimitsFromEnv() = %+v, %v; want 7 MiB, 9 MiB", l, err)
	}
	for _, bad := range []string{"0", "-1", "lots"} {
		t.Setenv("SOVEREIGN_PROFILE_MAX_UNPACKED_MB", bad)
		if _, err := LimitsFromEnv(); err == nil || !strings.Contains(err.Error(), "SOVEREIGN_PROFILE_MAX_UNPACKED_MB") {
			t.Errorf("SOVEREIGN_PROFILE_MAX_UNPACKED_MB=%s: err = %v, want one naming the variable", bad, err)
		}
	}
}

func TestBadArchive(t *testing.T) {
	t.Parallel()
	good := sample(t)
	for name, b := range map[string][]byte{
		"not gzip":  []byte("PK\x03\x04 this is a zip"),
		"truncated": good[:len(good)/2],
		"empty":     nil,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Unpack(bytes.NewReader(b), t.TempDir(), Limits{})
			if !errors.Is(err, ErrBadArchive) || Status(err) != http.StatusBadRequest {
				t.Errorf("Unpack(%s) = %v, want ErrBadArchive (400)", name, err)
			}
		})
	}
}

// TestRoundTrip: a raw profile normalized, packed and unpacked again holds
// exactly what the filter keeps, with its content.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	var norm bytes.Buffer
	st, err := Normalize(bytes.NewReader(sample(t)), &norm, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Dropped != 8 || st.Files != 5 {
		t.Errorf("Normalize stats = %+v, want 5 files kept, 8 dropped", st)
	}
	if got := listArchive(t, norm.Bytes()); !slices.Equal(slices.Sorted(slices.Values(got)), sampleKept) {
		t.Errorf("normalized archive holds %q, want %q", got, sampleKept)
	}
	// Unpack it, add what a browser would (cache, history, a lock), pack it
	// (export) and unpack that: only the kept entries come back.
	d := t.TempDir()
	if _, err := Unpack(bytes.NewReader(norm.Bytes()), d, Limits{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"Default/Cache/Cache_Data/data_1", "Default/History", "Default/Local Storage/leveldb/LOCK", "Crashpad/x"} {
		if err := os.MkdirAll(filepath.Join(d, filepath.Dir(p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, p), []byte("regenerable"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var packed bytes.Buffer
	pst, err := Pack(d, &packed)
	if err != nil {
		t.Fatal(err)
	}
	if pst.Dropped != 4 {
		t.Errorf("Pack dropped %d entries, want 4 (Cache/, History, LOCK, Crashpad/)", pst.Dropped)
	}
	if got := listArchive(t, packed.Bytes()); !slices.Equal(got, sampleKept) {
		t.Errorf("packed archive holds %q, want %q", got, sampleKept)
	}
	d2 := t.TempDir()
	if _, err := Unpack(bytes.NewReader(packed.Bytes()), d2, Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, d2); !slices.Equal(got, sampleKept) {
		t.Errorf("round trip holds %q, want %q", got, sampleKept)
	}
	b, err := os.ReadFile(filepath.Join(d2, "Default", "Local Storage", "leveldb", "000003.log"))
	if err != nil || string(b) != "ls" {
		t.Errorf("Local Storage log after the round trip = %q, %v", b, err)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{ErrUnsafePath, 400}, {ErrBadArchive, 400}, {ErrBadName, 400}, {ErrTooLarge, 413}, {ErrNotFound, 404},
		{errors.New("disk full"), 500},
	} {
		if got := Status(tc.err); got != tc.want {
			t.Errorf("Status(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
