package main

// A checkpoint cosigned by C2SP tlog-witnesses (c2sp.org/tlog-cosignature): verified with the log's note verifier
// and the witnesses' cosignature/v1 verifiers (github.com/transparency-dev/formats/note). The log's signature is
// required, and the cosignatures of at least `quorum` of the witnesses given (all of them by default): a witness
// policy of k of n.

import (
	"fmt"
	"os"
	"strings"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// keyList is a repeatable flag.
type keyList []string

func (k *keyList) String() string     { return strings.Join(*k, ",") }
func (k *keyList) Set(v string) error { *k = append(*k, strings.TrimSpace(v)); return nil }

func verifyCosigned(file, logKey string, witnessKeys []string, quorum int) {
	text, err := os.ReadFile(file)
	if err != nil {
		fail("cosigned checkpoint: %v", err)
	}
	logVerifier, err := note.NewVerifier(strings.TrimSpace(logKey))
	if err != nil {
		fail("log verifier key: %v", err)
	}
	if len(witnessKeys) == 0 {
		fail("no -witness-key given")
	}
	if quorum < 0 {
		quorum = len(witnessKeys)
	}
	if quorum > len(witnessKeys) {
		fail("a quorum of %d with %d witness keys", quorum, len(witnessKeys))
	}
	verifiers := []note.Verifier{logVerifier}
	for _, key := range witnessKeys {
		witness, err := fnote.NewVerifierForCosignatureV1(key)
		if err != nil {
			fail("witness verifier key: %v", err)
		}
		verifiers = append(verifiers, witness)
	}
	n, err := note.Open(text, note.VerifierList(verifiers...))
	if err != nil {
		fail("cosigned checkpoint does not verify: %v", err)
	}
	seen := map[string]bool{}
	for _, s := range n.Sigs {
		seen[fmt.Sprintf("%s+%08x", s.Name, s.Hash)] = true
	}
	signed := func(v note.Verifier) bool { return seen[fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())] }
	if !signed(logVerifier) {
		fail("no verified signature of %s", logVerifier.Name())
	}
	var cosigners, missing []string
	for _, v := range verifiers[1:] {
		if signed(v) {
			cosigners = append(cosigners, v.Name())
		} else {
			missing = append(missing, v.Name())
		}
	}
	if len(cosigners) < quorum {
		if quorum == len(witnessKeys) {
			fail("no verified signature of %s", missing[0])
		}
		fail("%d of %d witnesses cosigned (%s), the quorum is %d", len(cosigners), len(witnessKeys),
			strings.Join(cosigners, ", "), quorum)
	}
	fmt.Printf("OK cosigned by %s: %s", strings.Join(cosigners, ", "), n.Text)
}
