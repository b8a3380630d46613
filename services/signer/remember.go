package signer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// Remembered identities: a login with remember keeps its key under
// <DataDir>/identities/<npub>.ncryptsec, encrypted with NIP-49 under the
// passphrase the signer was started with (SOVEREIGN_SIGNER_PASSPHRASE). A
// later login, from any scope, with method local and only the pubkey loads
// it. Each owner (the gateway's caller: a token, an OAuth subject or
// anonymous) has its own directory: another owner neither lists nor loads
// them. The files are the only place a key is written; the passphrase
// never is.

// identitiesDir is where owner's remembered identities live:
// <data dir>/identities/<digest of owner>. Owners (the gateway's callers)
// never see each other's.
func (s *Service) identitiesDir(owner string) string {
	sum := sha256.Sum256([]byte("sovereign remembered identities\x00" + owner))
	return filepath.Join(s.cfg.DataDir, "identities", hex.EncodeToString(sum[:16]))
}

// canRemember says why a login that asks to be remembered cannot be.
func (s *Service) canRemember(m signerv1.Method) error {
	switch {
	case m != signerv1.Method_METHOD_LOCAL && m != signerv1.Method_METHOD_SEED:
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"login (%s): remember only applies to local and seed logins (this method holds no key here to keep)", methodName(m))
	case s.cfg.Passphrase == "":
		return bus.Errorf(commonv1.ErrorCode_FORBIDDEN,
			"login: remember is refused: the signer has no passphrase to encrypt keys with (start it with SOVEREIGN_SIGNER_PASSPHRASE or SOVEREIGN_SIGNER_PASSPHRASE_FILE set)")
	case s.cfg.DataDir == "":
		return bus.Errorf(commonv1.ErrorCode_FORBIDDEN,
			"login: remember is refused: the signer has no data dir (start it with --data-dir)")
	}
	return nil
}

// remember writes id's key as an ncryptsec file, atomically, readable by
// the signer's user only.
func (s *Service) remember(owner string, id *identity) error {
	var enc string
	err := id.withKey(func(k *nostr.SecretKey) error {
		var err error
		// Key security 0x02: the key came through a client and the
		// network, so whether it was handled safely is not known.
		enc, err = nostr.EncryptNcryptsec(k, s.cfg.Passphrase, s.cfg.RememberLogN, 0x02)
		return err
	})
	if err != nil {
		return fmt.Errorf("login: remember: encrypt: %w", err)
	}
	dir := s.identitiesDir(owner)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return bus.Errorf(commonv1.ErrorCode_INTERNAL, "login: remember: %v", err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return bus.Errorf(commonv1.ErrorCode_INTERNAL, "login: remember: %v", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(enc + "\n"); err != nil {
		f.Close()
		return bus.Errorf(commonv1.ErrorCode_INTERNAL, "login: remember: write: %v", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return bus.Errorf(commonv1.ErrorCode_INTERNAL, "login: remember: write: %v", err)
	}
	if err := f.Close(); err != nil {
		return bus.Errorf(commonv1.ErrorCode_INTERNAL, "login: remember: write: %v", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, id.npub+".ncryptsec")); err != nil {
		return bus.Errorf(commonv1.ErrorCode_INTERNAL, "login: remember: %v", err)
	}
	s.log.Info("identity remembered", "npub", id.npub)
	return nil
}

// loadRemembered decrypts the remembered key of pubkey (npub or hex).
func (s *Service) loadRemembered(owner, pubkey string) (*nostr.SecretKey, error) {
	pk, err := nostr.ParsePublicKey(pubkey)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "login (local): pubkey: %v", err)
	}
	npub, _ := nostr.EncodeNpub(pk)
	if s.cfg.DataDir == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "login (local): no remembered identity %s: this signer has no data dir; log in with nsec or privkey_hex", npub)
	}
	b, err := os.ReadFile(filepath.Join(s.identitiesDir(owner), npub+".ncryptsec"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND,
			"login (local): no remembered identity %s: log in with its nsec (or seed) and remember: true first", npub)
	}
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "login (local): read remembered identity %s: %v", npub, err)
	}
	if s.cfg.Passphrase == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_FORBIDDEN,
			"login (local): identity %s is remembered, but the signer has no passphrase to decrypt it (set SOVEREIGN_SIGNER_PASSPHRASE)", npub)
	}
	k, err := nostr.DecryptNcryptsec(strings.TrimSpace(string(b)), s.cfg.Passphrase)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_FORBIDDEN,
			"login (local): cannot decrypt remembered identity %s (was SOVEREIGN_SIGNER_PASSPHRASE changed?): %v", npub, err)
	}
	if k.PublicKey() != pk {
		k.Wipe()
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "login (local): the file of remembered identity %s holds another key; remove it", npub)
	}
	return k, nil
}

// rememberedList returns the npubs of owner's remembered identities,
// sorted.
func (s *Service) rememberedList(owner string) []string {
	if s.cfg.DataDir == "" {
		return nil
	}
	ents, err := os.ReadDir(s.identitiesDir(owner))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".ncryptsec"); ok && strings.HasPrefix(n, "npub1") && e.Type().IsRegular() {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
