module github.com/sovereign-fleet/sovereign/services/signer

go 1.26.8

replace (
	github.com/sovereign-fleet/sovereign/proto => ../../proto
	github.com/sovereign-fleet/sovereign/services/kit => ../kit
)

require (
	github.com/btcsuite/btcd/btcec/v2 v2.3.5
	github.com/sovereign-fleet/sovereign/services/kit v0.0.0
	golang.org/x/crypto v0.58.0
	golang.org/x/sys v0.50.0
	golang.org/x/text v0.43.0
)

require (
	github.com/btcsuite/btcd/chaincfg/chainhash v1.0.1 // indirect
	github.com/decred/dcrd/crypto/blake256 v1.0.0 // indirect
	github.com/decred/dcrd/dcrec/secp256k1/v4 v4.0.1 // indirect
)
