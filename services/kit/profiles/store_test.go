package profiles

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := natstest.Server(t)
	s, err := Open(ctx, natstest.Conn(t, srv), "", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List on an empty store = %v, %v", list, err)
	}
	info, err := s.Put(ctx, "gemini", bytes.NewReader(sample(t)))
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "gemini" || info.Stats.Files != 5 || info.Stats.Dropped != 8 || !strings.HasPrefix(info.Digest, "sha256:") ||
		len(info.Hex()) != 64 || info.Size == 0 || info.Uploaded.IsZero() {
		t.Errorf("Put = %+v", info)
	}
	// A second handle (another worker) sees it, with the same Info.
	s2, err := Open(ctx, natstest.Conn(t, srv), "", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rc, got, err := s2.Get(ctx, "gemini")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != info.Digest || got.Stats.Files != 5 || int64(len(b)) != info.Size {
		t.Errorf("Get = %+v (%d bytes), want %+v", got, len(b), info)
	}
	if names := listArchive(t, b); !slices.Equal(slices.Sorted(slices.Values(names)), sampleKept) {
		t.Errorf("stored archive holds %q, want the filtered %q", names, sampleKept)
	}
	if st, err := s2.Stat(ctx, "gemini"); err != nil || st.Digest != info.Digest {
		t.Errorf("Stat = %+v, %v", st, err)
	}

	// A bad upload leaves the stored profile as it was.
	_, err = s.Put(ctx, "gemini", bytes.NewReader(archive(t, file("../evil", "x"))))
	if !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("Put(traversal) = %v, want ErrUnsafePath", err)
	}
	small, err := Open(ctx, natstest.Conn(t, srv), "", Limits{MaxUnpacked: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	_, err = small.Put(ctx, "gemini", bytes.NewReader(archive(t, tarEntry{name: "Default/big", typ: '0', size: 2 << 20})))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Put(oversize) = %v, want ErrTooLarge", err)
	}
	if st, err := s.Stat(ctx, "gemini"); err != nil || st.Digest != info.Digest {
		t.Errorf("after failed puts: Stat = %+v, %v; want digest %s", st, err, info.Digest)
	}

	// Export filters on the way out too.
	var out bytes.Buffer
	if st, err := s.Export(ctx, "gemini", &out); err != nil || st.Files != 5 {
		t.Fatalf("Export = %+v, %v", st, err)
	}
	if names := listArchive(t, out.Bytes()); !slices.Equal(slices.Sorted(slices.Values(names)), sampleKept) {
		t.Errorf("export holds %q", names)
	}

	// A new upload changes the digest.
	info2, err := s.Put(ctx, "gemini", bytes.NewReader(archive(t, file("Default/Cookies", "other"))))
	if err != nil {
		t.Fatal(err)
	}
	if info2.Digest == info.Digest {
		t.Errorf("a different upload kept digest %s", info.Digest)
	}
	if _, err := s.Put(ctx, "claude", bytes.NewReader(sample(t))); err != nil {
		t.Fatal(err)
	}
	list, err := s2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "claude" || list[1].Name != "gemini" || list[1].Digest != info2.Digest {
		t.Errorf("List = %+v, want claude and gemini (new digest)", list)
	}

	if err := s.Delete(ctx, "gemini"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s2.Get(ctx, "gemini"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "gemini") {
		t.Errorf("Get after Delete = %v, want ErrNotFound naming it", err)
	}
	if err := s.Delete(ctx, "gemini"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete twice = %v, want ErrNotFound", err)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 1 || list[0].Name != "claude" {
		t.Errorf("List after Delete = %+v, %v", list, err)
	}
}

func TestStoreNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, natstest.Conn(t, natstest.Server(t)), "acme", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "Gemini", "../x", "a/b", "1abc", strings.Repeat("a", 65), "a b"} {
		if _, err := s.Put(ctx, bad, bytes.NewReader(sample(t))); !errors.Is(err, ErrBadName) {
			t.Errorf("Put(%q) = %v, want ErrBadName", bad, err)
		}
		if _, _, err := s.Get(ctx, bad); !errors.Is(err, ErrBadName) {
			t.Errorf("Get(%q) = %v, want ErrBadName", bad, err)
		}
	}
	for _, good := range []string{"a", "gemini-pro_2", strings.Repeat("a", 64)} {
		if err := CheckName(good); err != nil {
			t.Errorf("CheckName(%q) = %v", good, err)
		}
	}
	if got := Bucket("acme.dev"); got != "acme_dev_profiles" {
		t.Errorf("Bucket(acme.dev) = %q", got)
	}
	if got := Bucket(""); got != "sov_profiles" {
		t.Errorf("Bucket() = %q", got)
	}
}
