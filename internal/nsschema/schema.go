// Package nsschema holds the one type that describes a namespace's KV
// layout: the SDKs (client, client/local) send it, the node lists it
// (node.NamespaceInfo), and it converts to and from the wire message
// (kvringv1.NamespaceSchema). It is a leaf: it imports only the generated
// protobuf package, so the SDK can import it without linking any server
// package.
package nsschema

import (
	"maps"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// Schema describes the KV layout of a namespace. Two clients with different
// schemas under one namespace name are refused (FailedPrecondition naming
// the fields that differ) instead of silently missing each other's chunks.
//
// The JSON form is the admin API's (GET /v1/namespaces) and the local
// socket's (kvring_register_namespace_request); ChunksPerGroup and Extra are
// omitted when empty.
type Schema struct {
	Model          string `json:"model"`
	Dtype          string `json:"dtype"`
	TokensPerChunk uint32 `json:"tokens_per_chunk"`
	Layout         string `json:"layout"`
	HashScheme     string `json:"hash_scheme"`
	TPRank         uint32 `json:"tp_rank"`
	TPSize         uint32 `json:"tp_size"`
	// ChunksPerGroup is the placement group size K in chunks (see
	// client.GroupKeys): above 1, a prompt's chunks are placed K at a time,
	// so a Lookup asks a few nodes instead of one node per chunk; Put then
	// needs every Chunk.Group, and Lookup and Get take ids that start at a
	// prompt's first chunk. 32 (one 512-token block at 16 tokens a chunk)
	// suits engines; see docs/placement.md. Default 0: each chunk is placed
	// by its own id. Part of the fingerprint when above 1. At most 4096.
	ChunksPerGroup uint32            `json:"chunks_per_group,omitempty"`
	Extra          map[string]string `json:"extra,omitempty"`
}

// Proto returns s as the wire message. Extra is shared, not copied.
func (s Schema) Proto() *kvringv1.NamespaceSchema {
	return &kvringv1.NamespaceSchema{Model: s.Model, Dtype: s.Dtype, TokensPerChunk: s.TokensPerChunk, Layout: s.Layout,
		HashScheme: s.HashScheme, TpRank: s.TPRank, TpSize: s.TPSize, Extra: s.Extra, ChunksPerGroup: s.ChunksPerGroup}
}

// FromProto returns the schema p carries (the zero Schema for nil), with
// Extra copied.
func FromProto(p *kvringv1.NamespaceSchema) Schema {
	return Schema{Model: p.GetModel(), Dtype: p.GetDtype(), TokensPerChunk: p.GetTokensPerChunk(), Layout: p.GetLayout(),
		HashScheme: p.GetHashScheme(), TPRank: p.GetTpRank(), TPSize: p.GetTpSize(), Extra: maps.Clone(p.GetExtra()),
		ChunksPerGroup: p.GetChunksPerGroup()}
}
