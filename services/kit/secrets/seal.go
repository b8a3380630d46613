package secrets

import "errors"

// Seal encrypts value under name for a service that keeps a secret in a
// record of its own (the agent's provider API key in its KV bucket): the
// same AES-256-GCM record, padding and key id as the store's, bound to
// name, so a record copied under another name does not open. Neither
// value nor any part of it is ever in an error. A nil key returns
// [ErrNoKey].
func (k *Key) Seal(name string, value []byte) ([]byte, error) {
	if k == nil {
		return nil, ErrNoKey
	}
	if len(value) == 0 {
		return nil, errors.New("seal: the value is empty")
	}
	return k.seal(name, value)
}

// Open decrypts a record Seal made under name. Its errors wrap
// [ErrNoKey] (nil key), [ErrWrongKey] (sealed with another key) or
// [ErrTampered]; they name the secret store's remedies, so a caller with
// its own store words its advice after checking them with errors.Is.
func (k *Key) Open(name string, sealed []byte) ([]byte, error) {
	if k == nil {
		return nil, ErrNoKey
	}
	r, err := decode(name, sealed)
	if err != nil {
		return nil, err
	}
	return k.open(name, r)
}
