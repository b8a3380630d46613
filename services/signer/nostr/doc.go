// Package nostr holds the Nostr primitives the signer needs, written
// against the specifications and tested with their vectors:
//
//   - NIP-01 events: canonical serialisation, ids, BIP-340 signatures
//     (Event, SignEvent, VerifyEvent);
//   - keys: SecretKey, which never prints its value and can be wiped,
//     ParseSecretKey, ParsePublicKey;
//   - NIP-19 bech32 entities (EncodeNpub, EncodeNsec, EncodeNote,
//     EncodeNprofile, EncodeNevent, EncodeNaddr, Decode);
//   - NIP-06 keys from BIP-39 mnemonics (ValidateMnemonic,
//     KeyFromMnemonic), with BIP-32 derivation;
//   - NIP-44 v2 encryption, with the extended length prefix
//     (ConversationKey, Nip44Encrypt, Nip44Decrypt);
//   - NIP-04 encryption (Nip04Encrypt, Nip04Decrypt), deprecated but
//     still asked for by NIP-07 pages;
//   - NIP-49 password-encrypted keys (EncryptNcryptsec, DecryptNcryptsec).
//
// secp256k1 and BIP-340 come from github.com/btcsuite/btcd/btcec/v2; the
// symmetric primitives from the standard library and golang.org/x/crypto.
// Errors never contain a secret key, a mnemonic word or a password.
package nostr
