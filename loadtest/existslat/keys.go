package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/redis/go-redis/v9"
)

// metadata is LMCache's RemoteMetadata of a 3 MiB chunk: seven int32s
// (a new slice each call, owned by the caller).
func metadata() []byte {
	b := make([]byte, 28)
	for i, v := range []uint32{3 << 20, 2, 256, 8, 384, 1, 1} {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// locateBatch is the most keys asked of the admin API at once (its limit
// is 256).
const locateBatch = 128

// keyName is candidate i: an LMCache key prefix in its current layout
// (<model>@<world>@<worker>@<chunk hash hex>@<dtype>).
func keyName(i int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "existslat %d", i))
	return fmt.Sprintf("meta-llama/Llama-3.1-8B@1@0@%x@bfloat16", int64(binary.BigEndian.Uint64(h[:8])))
}

// setChunk writes a chunk as LMCache does: <prefix>kv_bytes (size bytes),
// then <prefix>metadata. kvring counts a metadata key in EXISTS only while
// its kv_bytes is held.
func setChunk(ctx context.Context, c *redis.Client, prefix string, size int) error {
	kv := make([]byte, size)
	copy(kv, prefix)
	if err := c.Set(ctx, prefix+"kv_bytes", kv, 0).Err(); err != nil {
		return fmt.Errorf("cannot SET %skv_bytes: %w", prefix, err)
	}
	if err := c.Set(ctx, prefix+"metadata", metadata(), 0).Err(); err != nil {
		return fmt.Errorf("cannot SET %smetadata: %w", prefix, err)
	}
	return nil
}

// location is the part of GET /v1/resp/locate's answer used here.
type location struct {
	Node string `json:"node"`
	Keys []struct {
		Key        string            `json:"key"`
		Owners     []string          `json:"owners"`
		Holders    []string          `json:"holders"`
		Unanswered map[string]string `json:"unanswered"`
	} `json:"keys"`
}

// pickKeys SETs candidates through kv in batches and sorts them by where
// the node at o.admin says they live, until it has o.keys the node neither
// owns nor holds (remote) and o.keys it holds (local).
func pickKeys(ctx context.Context, kv *redis.Client, o options) (remote, local []string, err error) {
	for next := 0; len(remote) < o.keys || len(local) < o.keys; next += locateBatch {
		if next >= o.maxCandidates {
			return nil, nil, fmt.Errorf("found %d remote and %d local keys among %d written: is the cluster one node?",
				len(remote), len(local), next)
		}
		batch := make([]string, locateBatch)
		for i := range batch {
			batch[i] = keyName(next+i) + "metadata"
			if err := setChunk(ctx, kv, keyName(next+i), o.valueSize); err != nil {
				return nil, nil, fmt.Errorf("kvring: %w", err)
			}
		}
		loc, err := locate(ctx, o.admin, batch)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range loc.Keys {
			switch {
			case len(k.Unanswered) > 0 || len(k.Holders) == 0:
				continue
			case slices.Contains(k.Holders, loc.Node):
				if len(local) < o.keys {
					local = append(local, k.Key)
				}
			case !slices.Contains(k.Owners, loc.Node) && len(remote) < o.keys:
				remote = append(remote, k.Key)
			}
		}
	}
	return remote, local, nil
}

// locate asks the admin API at admin where keys live.
func locate(ctx context.Context, admin string, keys []string) (*location, error) {
	u := "http://" + admin + "/v1/resp/locate?" + url.Values{"key": keys}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot build the locate request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot locate keys at %s: %w", admin, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cannot locate keys at %s: %s", admin, resp.Status)
	}
	var loc location
	if err := json.NewDecoder(resp.Body).Decode(&loc); err != nil {
		return nil, fmt.Errorf("cannot decode the locate answer of %s: %w", admin, err)
	}
	return &loc, nil
}
