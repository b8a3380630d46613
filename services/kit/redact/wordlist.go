package redact

import (
	_ "embed"
	"strings"
)

// englishList is the BIP-39 English wordlist: 2048 words, one a line,
// "abandon" to "zoo". TestWordlist checks its SHA-256,
// 2f5eed53a4727b4bf8880d8f3f199efc90e58503646d9ff8eff3a2ed3b24dbda, the
// hash of bip-0039/english.txt in github.com/bitcoin/bips.
//
// Source: copied byte for byte from the word list in
// github.com/cosmos/go-bip39 v1.0.0 (wordlist.go, a fork of
// github.com/tyler-smith/go-bip39), which checks it against the CRC-32 of
// bitcoin/bips bip-0039/english.txt. That module is under the MIT License:
//
//	The MIT License (MIT)
//
//	Copyright (c) 2014 Tyler Smith
//
//	Permission is hereby granted, free of charge, to any person obtaining a copy
//	of this software and associated documentation files (the "Software"), to deal
//	in the Software without restriction, including without limitation the rights
//	to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
//	copies of the Software, and to permit persons to whom the Software is
//	furnished to do so, subject to the following conditions:
//
//	The above copyright notice and this permission notice shall be included in all
//	copies or substantial portions of the Software.
//
//	THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
//	IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
//	FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
//	AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
//	LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
//	OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
//	SOFTWARE.
//
// The list itself is the one published with BIP-39 in
// github.com/bitcoin/bips (bip-0039/english.txt).
//
//go:embed english.txt
var englishList string

// wordTable holds the BIP-39 words packed by pack, in an open-addressing
// hash table (linear probing, half full; 0 is an empty slot): a lookup
// costs a multiplication and one or two loads, which matters because
// every word of every text is looked up.
var wordTable = buildWords()

const wordSlots = 4096 // a power of two, twice the number of words

func buildWords() *[wordSlots]uint64 {
	var t [wordSlots]uint64
	list := strings.Split(strings.TrimSuffix(englishList, "\n"), "\n")
	if len(list) != 2048 {
		panic("redact: the BIP-39 list does not have 2048 words")
	}
	for _, w := range list {
		k, ok := pack(w)
		if !ok {
			panic("redact: bad BIP-39 word " + w)
		}
		i := wordSlot(k)
		for t[i] != 0 && t[i] != k {
			i = (i + 1) & (wordSlots - 1)
		}
		t[i] = k
	}
	return &t
}

func wordSlot(k uint64) uint64 {
	return (k * 0x9e3779b97f4a7c15) >> (64 - 12)
}

// pack packs a word of 3 to 8 ASCII letters, case-insensitively, into 5
// bits a letter; ok is false for anything else (no BIP-39 word is shorter
// than 3 or longer than 8 letters).
func pack(w string) (k uint64, ok bool) {
	if len(w) < 3 || len(w) > 8 {
		return 0, false
	}
	for i := 0; i < len(w); i++ {
		c := w[i] | 0x20 // lower-cases letters
		if c < 'a' || c > 'z' {
			return 0, false
		}
		k = k<<5 | uint64(c-'a'+1)
	}
	return k, true
}

// isWord reports whether w is a BIP-39 English word (in any case).
func isWord(w string) bool {
	k, ok := pack(w)
	if !ok {
		return false
	}
	for i := wordSlot(k); ; i = (i + 1) & (wordSlots - 1) {
		switch wordTable[i] {
		case k:
			return true
		case 0:
			return false
		}
	}
}

// BIP39English returns the BIP-39 English word list: 2048 words in
// order, index 0 "abandon" to 2047 "zoo". The slice is a fresh copy.
func BIP39English() []string {
	return strings.Split(strings.TrimSuffix(englishList, "\n"), "\n")
}
