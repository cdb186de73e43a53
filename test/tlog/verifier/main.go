// Command verifier checks a zhongshu-hub ledger with the standard Go transparency-log libraries only: the C2SP
// checkpoint (golang.org/x/mod/sumdb/note, github.com/transparency-dev/formats/log), the tiles
// (golang.org/x/mod/sumdb/tlog verifies every tile it reads against the checkpoint's root), every entry bundle (each
// entry's RFC 6962 leaf hash proved included with github.com/transparency-dev/merkle), and, given an older
// checkpoint, consistency between the two. Any mismatch exits 1 with one line saying what failed.
//
//	verifier -url http://127.0.0.1:8080/tlog -key '<origin>+<key id>+<key>' [-old old.checkpoint] [-save new.checkpoint]
//	verifier -cosigned cosigned.checkpoint -key '<log key>' -witness-key '<name>+<key id>+<base64 0x04||key>' … [-quorum k]
//
// The second form verifies a checkpoint carrying witnesses' cosignatures (cosigned.go): -witness-key repeated, one a
// witness, and at least -quorum of them (all by default) must have cosigned it.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

var client = &http.Client{Timeout: 30 * time.Second}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func get(url string) []byte {
	res, err := client.Get(url)
	if err != nil {
		fail("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		fail("GET %s: %v", url, err)
	}
	if res.StatusCode != http.StatusOK {
		fail("GET %s: %s: %s", url, res.Status, strings.TrimSpace(string(body)))
	}
	return body
}

// parseCheckpoint verifies a checkpoint's signature with the log's key and parses it.
func parseCheckpoint(what string, text []byte, verifier note.Verifier) *log.Checkpoint {
	if _, err := note.Open(text, note.VerifierList(verifier)); err != nil {
		fail("%s: signature does not verify with %s: %v", what, verifier.Name(), err)
	}
	cp, _, _, err := log.ParseCheckpoint(text, verifier.Name(), verifier)
	if err != nil {
		fail("%s: not a checkpoint of %s: %v", what, verifier.Name(), err)
	}
	return cp
}

// tileReader fetches C2SP tiles (tile/<L>/<N>[.p/<W>], no height element) over HTTP, each once per run
// (TileHashReader checks a tile against the signed root every time it is handed one, cached or not).
type tileReader struct {
	prefix string
	cache  map[string][]byte
}

func (r tileReader) Height() int { return 8 }

func (r tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		path := strings.Replace(t.Path(), "tile/8/", "tile/", 1)
		data, ok := r.cache[path]
		if !ok {
			data = get(r.prefix + "/" + path)
			r.cache[path] = data
		}
		if len(data) != t.W*tlog.HashSize {
			return nil, fmt.Errorf("%s: %d bytes, want %d", path, len(data), t.W*tlog.HashSize)
		}
		out[i] = data
	}
	return out, nil
}

func (r tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

func main() {
	url := flag.String("url", "", "the log's prefix, e.g. http://127.0.0.1:8080/tlog")
	key := flag.String("key", "", "the checkpoint verifier key (GET <prefix>/verifier-key)")
	old := flag.String("old", "", "an older checkpoint of the same log to prove consistency with")
	save := flag.String("save", "", "where to write the checkpoint verified now")
	cosigned := flag.String("cosigned", "", "instead: a checkpoint with a witness's cosignature lines to verify")
	var witnessKeys keyList
	flag.Var(&witnessKeys, "witness-key", "with -cosigned: a witness's cosignature verifier key (repeat for several)")
	quorum := flag.Int("quorum", -1, "with -cosigned: how many of the witnesses must have cosigned (default: all)")
	flag.Parse()
	if *cosigned != "" {
		verifyCosigned(*cosigned, *key, witnessKeys, *quorum)
		return
	}
	if *url == "" || *key == "" {
		fail("usage: verifier -url <prefix> -key <verifier key> [-old file] [-save file]")
	}
	prefix := strings.TrimRight(*url, "/")
	verifier, err := note.NewVerifier(strings.TrimSpace(*key))
	if err != nil {
		fail("verifier key: %v", err)
	}

	text := get(prefix + "/checkpoint")
	cp := parseCheckpoint("checkpoint", text, verifier)
	size := int64(cp.Size)
	var root tlog.Hash
	copy(root[:], cp.Hash)
	tree := tlog.Tree{N: size, Hash: root}
	hashes := tlog.TileHashReader(tree, tileReader{prefix, map[string][]byte{}})
	if size > 0 {
		// Reads the rightmost tiles and checks they hash to the signed root.
		if got, err := tlog.TreeHash(size, hashes); err != nil || got != root {
			fail("tree hash of %d entries from the tiles: %v (got %x, signed %x)", size, err, got[:], root[:])
		}
	}

	// Every entry: its bytes from the bundles hash to the leaf the tiles hold, and its inclusion proof verifies.
	hasher := rfc6962.DefaultHasher
	for n := int64(0); n*256 < size; n++ {
		width := size - n*256
		path := tlog.Tile{H: 8, L: 0, N: n, W: 256}.Path()
		if width < 256 {
			path = tlog.Tile{H: 8, L: 0, N: n, W: int(width)}.Path()
		} else {
			width = 256
		}
		bundle := get(prefix + "/" + strings.Replace(path, "tile/8/0/", "tile/entries/", 1))
		for i := int64(0); i < width; i++ {
			index := n*256 + i
			if len(bundle) < 2 {
				fail("entry bundle %d: ends before entry %d", n, index)
			}
			length := int(binary.BigEndian.Uint16(bundle))
			if len(bundle) < 2+length {
				fail("entry bundle %d: entry %d is cut short", n, index)
			}
			entry := bundle[2 : 2+length]
			bundle = bundle[2+length:]
			leaf := tlog.RecordHash(entry)
			stored, err := hashes.ReadHashes([]int64{tlog.StoredHashIndex(0, index)})
			if err != nil {
				fail("leaf %d from the tiles: %v", index, err)
			}
			if stored[0] != leaf {
				fail("entry %d (seq %d): its bytes hash to %x, the tree holds %x", index, index+1, leaf[:], stored[0][:])
			}
			p, err := tlog.ProveRecord(size, index, hashes)
			if err != nil {
				fail("inclusion proof of entry %d: %v", index, err)
			}
			if err := tlog.CheckRecord(p, size, root, index, leaf); err != nil {
				fail("inclusion of entry %d (sumdb/tlog): %v", index, err)
			}
			path := make([][]byte, len(p))
			for j := range p {
				path[j] = p[j][:]
			}
			if err := proof.VerifyInclusion(hasher, uint64(index), uint64(size), leaf[:], path, root[:]); err != nil {
				fail("inclusion of entry %d (transparency-dev/merkle): %v", index, err)
			}
		}
		if len(bundle) != 0 {
			fail("entry bundle %d: %d bytes after its %d entries", n, len(bundle), width)
		}
	}

	if *old != "" {
		oldText, err := os.ReadFile(*old)
		if err != nil {
			fail("old checkpoint: %v", err)
		}
		checkConsistency(parseCheckpoint("old checkpoint", oldText, verifier), cp, hashes)
	}
	if *save != "" {
		if err := os.WriteFile(*save, text, 0o644); err != nil {
			fail("save: %v", err)
		}
	}
	fmt.Printf("OK %s: %d entries, root %x\n", cp.Origin, size, root[:])
}

// checkConsistency proves that the tree of the older checkpoint is a prefix of the newer one's, from the tiles.
func checkConsistency(prev, cp *log.Checkpoint, hashes tlog.HashReader) {
	if prev.Size > cp.Size {
		fail("the log shrank: old checkpoint has %d entries, the new one %d", prev.Size, cp.Size)
	}
	if prev.Size == 0 {
		fmt.Println("the old checkpoint is the empty tree: every tree extends it")
		return
	}
	var root, prevRoot tlog.Hash
	copy(root[:], cp.Hash)
	copy(prevRoot[:], prev.Hash)
	size := int64(cp.Size)
	tp, err := tlog.ProveTree(size, int64(prev.Size), hashes)
	if err != nil {
		fail("consistency proof %d -> %d: %v", prev.Size, size, err)
	}
	if err := tlog.CheckTree(tp, size, root, int64(prev.Size), prevRoot); err != nil {
		fail("consistency %d -> %d (sumdb/tlog): %v", prev.Size, size, err)
	}
	path := make([][]byte, len(tp))
	for j := range tp {
		path[j] = tp[j][:]
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, prev.Size, cp.Size, path, prev.Hash, cp.Hash); err != nil {
		fail("consistency %d -> %d (transparency-dev/merkle): %v", prev.Size, size, err)
	}
	fmt.Printf("consistent with the checkpoint of %d entries\n", prev.Size)
}
