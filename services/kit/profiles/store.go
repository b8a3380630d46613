package profiles

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/config"

	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// NamePattern is what a profile name must match; it also rules out path
// traversal where names become paths.
const NamePattern = `^[a-z][a-z0-9_-]{0,63}$`

var nameRE = regexp.MustCompile(NamePattern)

// CheckName returns ErrBadName when name does not match NamePattern.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w %q: must match %s", ErrBadName, name, NamePattern)
	}
	return nil
}

// BucketSuffix follows the bus prefix in the object store's name.
const BucketSuffix = "_profiles"

// Bucket is the object store of the base profiles for a bus prefix:
// "sov_profiles" for the default prefix ("" or "sov"). Characters a bucket
// name cannot hold become _.
func Bucket(prefix string) string {
	return bus.BucketName(prefix, BucketSuffix)
}

// Info describes a stored profile.
type Info struct {
	Name string `json:"name"`
	// Size is the stored (filtered, re-packed) archive's size in bytes.
	Size int64 `json:"size"`
	// Digest is "sha256:" and the hex SHA-256 of the stored archive; it
	// changes with every new upload of different content.
	Digest string `json:"digest"`
	// Uploaded is when the profile was stored.
	Uploaded time.Time `json:"uploaded"`
	// Stats is what the upload held: kept files and their bytes, dropped
	// and skipped entries.
	Stats Stats `json:"stats"`
}

// Hex is the digest's hex part, fit for a file name.
func (i Info) Hex() string { return strings.TrimPrefix(i.Digest, "sha256:") }

// Store keeps base profiles in a NATS JetStream object store, one object
// per profile (its filtered archive), where every worker fetches them.
type Store struct {
	obj jetstream.ObjectStore
	lim Limits
}

// Open opens the profiles object store of the bus prefix ("" for the
// default), creating it when missing, on file storage with the fleet's
// replica count (SOVEREIGN_NATS_REPLICAS). lim bounds what Put accepts.
func Open(ctx context.Context, nc *nats.Conn, prefix string, lim Limits) (*Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	bucket := Bucket(prefix)
	obj, err := js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obj, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      bucket,
			Description: "Sovereign base profiles (filtered Chromium user data directories, tar.gz)",
			Storage:     jetstream.FileStorage,
			Replicas:    config.JetStreamReplicas(),
		})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			obj, err = js.ObjectStore(ctx, bucket)
		}
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return nil, fmt.Errorf("the NATS server has JetStream off, and base profiles live in a JetStream object store: "+
			"start nats-server with -js (or enable JetStream for this account): %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("profiles object store %s: %w", bucket, err)
	}
	return &Store{obj: obj, lim: lim.withDefaults()}, nil
}

// Limits returns the limits Put applies.
func (s *Store) Limits() Limits { return s.lim }

// Put stores the tar.gz upload r as profile name, replacing any profile of
// that name. The upload is filtered and re-packed first (Normalize): an
// unsafe path, a bad archive or a limit fails the Put and leaves the
// stored profile as it was.
func (s *Store) Put(ctx context.Context, name string, r io.Reader) (Info, error) {
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	tmp, err := os.CreateTemp("", "sovereign-profile-*.tgz")
	if err != nil {
		return Info{}, fmt.Errorf("put profile %s: %w", name, err)
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	st, err := Normalize(r, tmp, s.lim)
	if err != nil {
		return Info{}, fmt.Errorf("put profile %s: %w", name, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return Info{}, fmt.Errorf("put profile %s: %w", name, err)
	}
	meta := jetstream.ObjectMeta{Name: name, Description: "base profile " + name, Metadata: map[string]string{
		"files":         strconv.Itoa(st.Files),
		"dirs":          strconv.Itoa(st.Dirs),
		"bytes":         strconv.FormatInt(st.Bytes, 10),
		"dropped":       strconv.Itoa(st.Dropped),
		"dropped_bytes": strconv.FormatInt(st.DroppedBytes, 10),
		"skipped":       strconv.Itoa(st.Skipped),
	}}
	oi, err := s.obj.Put(ctx, meta, tmp)
	if err != nil {
		return Info{}, fmt.Errorf("put profile %s: %w", name, err)
	}
	info, err := toInfo(oi)
	info.Stats.SkippedNames = st.SkippedNames
	return info, err
}

// Stat returns the profile's Info, or ErrNotFound.
func (s *Store) Stat(ctx context.Context, name string) (Info, error) {
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	oi, err := s.obj.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return Info{}, fmt.Errorf("profile %s: %w", name, err)
	}
	return toInfo(oi)
}

// Get returns the profile's stored archive (a filtered tar.gz) and its
// Info, or ErrNotFound. The reader checks the archive's digest at its end
// (a mismatch is a read error); the caller closes it.
func (s *Store) Get(ctx context.Context, name string) (io.ReadCloser, Info, error) {
	if err := CheckName(name); err != nil {
		return nil, Info{}, err
	}
	res, err := s.obj.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, Info{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, Info{}, fmt.Errorf("profile %s: %w", name, err)
	}
	oi, err := res.Info()
	if err != nil {
		_ = res.Close()
		return nil, Info{}, fmt.Errorf("profile %s: %w", name, err)
	}
	info, err := toInfo(oi)
	if err != nil {
		_ = res.Close()
		return nil, Info{}, err
	}
	return res, info, nil
}

// Export writes the profile's archive to w, filtered again on the way
// out (Normalize), and returns what it held. Whether exporting is allowed
// (SOVEREIGN_PROFILE_EXPORT) is the caller's decision.
func (s *Store) Export(ctx context.Context, name string, w io.Writer) (Stats, error) {
	rc, _, err := s.Get(ctx, name)
	if err != nil {
		return Stats{}, err
	}
	defer rc.Close()
	st, err := Normalize(rc, w, s.lim)
	if err != nil {
		return st, fmt.Errorf("export profile %s: %w", name, err)
	}
	return st, nil
}

// Delete removes the profile, or returns ErrNotFound.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	// Deleting a deleted object succeeds (it leaves a marker): ask first.
	_, err := s.obj.GetInfo(ctx, name)
	if err == nil {
		err = s.obj.Delete(ctx, name)
	}
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("delete profile %s: %w", name, err)
	}
	return nil
}

// List returns the stored profiles, by name.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	ois, err := s.obj.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return []Info{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	out := make([]Info, 0, len(ois))
	for _, oi := range ois {
		info, err := toInfo(oi)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// toInfo reads an object's Info; the digest is the object store's own
// (SHA-256, checked on every read).
func toInfo(oi *jetstream.ObjectInfo) (Info, error) {
	sum, err := base64.URLEncoding.DecodeString(strings.TrimPrefix(oi.Digest, "SHA-256="))
	if err != nil || len(sum) != sha256.Size {
		return Info{}, fmt.Errorf("profile %s: object digest %q is not SHA-256", oi.Name, oi.Digest)
	}
	m := oi.Metadata
	atoi := func(k string) int { n, _ := strconv.Atoi(m[k]); return n }
	atoi64 := func(k string) int64 { n, _ := strconv.ParseInt(m[k], 10, 64); return n }
	return Info{
		Name:     oi.Name,
		Size:     int64(oi.Size),
		Digest:   "sha256:" + hex.EncodeToString(sum),
		Uploaded: oi.ModTime,
		Stats: Stats{Files: atoi("files"), Dirs: atoi("dirs"), Bytes: atoi64("bytes"),
			Dropped: atoi("dropped"), DroppedBytes: atoi64("dropped_bytes"), Skipped: atoi("skipped")},
	}, nil
}
