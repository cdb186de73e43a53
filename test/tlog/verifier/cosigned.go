package main

// A checkpoint cosigned by a C2SP tlog-witness (c2sp.org/tlog-cosignature): verified with the log's note verifier
// and the witness's cosignature/v1 verifier (github.com/transparency-dev/formats/note), both required.

import (
	"fmt"
	"os"
	"strings"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

func verifyCosigned(file, logKey, witnessKey string) {
	text, err := os.ReadFile(file)
	if err != nil {
		fail("cosigned checkpoint: %v", err)
	}
	logVerifier, err := note.NewVerifier(strings.TrimSpace(logKey))
	if err != nil {
		fail("log verifier key: %v", err)
	}
	witness, err := fnote.NewVerifierForCosignatureV1(strings.TrimSpace(witnessKey))
	if err != nil {
		fail("witness verifier key: %v", err)
	}
	n, err := note.Open(text, note.VerifierList(logVerifier, witness))
	if err != nil {
		fail("cosigned checkpoint does not verify: %v", err)
	}
	seen := map[string]bool{}
	for _, s := range n.Sigs {
		seen[fmt.Sprintf("%s+%08x", s.Name, s.Hash)] = true
	}
	for _, v := range []note.Verifier{logVerifier, witness} {
		if !seen[fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())] {
			fail("no verified signature of %s", v.Name())
		}
	}
	fmt.Printf("OK cosigned by %s: %s", witness.Name(), n.Text)
}
