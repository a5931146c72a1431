package localsock

// Request limits of the JSON protocol (docs/vineyard.md, "Limits"). A frame
// may be up to MaxMessageBytes long, as Vineyard allows; past these limits a
// request gets an error reply (code 1, Invalid) naming the limit, and the
// connection keeps serving. Decoding is bounded too: a request's fields
// point into its frame, and the arrays of ids are parsed in place, so a
// request costs its frame plus 8 bytes per id (12 more per id under index
// keys) and a small map of named fields.
const (
	// MaxIDsPerRequest is the most ids (or sizes) one request may carry in
	// an array or as index keys: 1,048,576, four thousand 4k-token prompts'
	// worth of 16-token chunks.
	MaxIDsPerRequest = 1 << 20
	// maxFields is the most named fields (other than index keys) of one
	// request; Vineyard's requests have at most seven.
	maxFields = 64
	// maxListRequestBytes bounds the requests that name many ids or sizes:
	// a million 19-digit blob ids, as an array or as index keys.
	maxListRequestBytes = 48 << 20
	// maxMetadataRequestBytes bounds create_data_request, whose metadata
	// tree is decoded into maps (several times its size in memory).
	maxMetadataRequestBytes = 8 << 20
	// maxSmallRequestBytes bounds every other request.
	maxSmallRequestBytes = 1 << 20
)

// listRequests are the request types that may carry up to MaxIDsPerRequest
// ids or sizes.
var listRequests = map[string]bool{
	"get_buffers_request": true, "create_buffers_request": true, "increase_reference_count_request": true,
	"del_data_request": true, "get_data_request": true, "release_request": true,
	"kvring_publish_request": true, "kvring_lookup_request": true, "kvring_get_request": true, "kvring_release_request": true,
}

// maxRequestBytes is the longest JSON body a request of type typ may have.
func maxRequestBytes(typ string) int {
	switch {
	case listRequests[typ]:
		return maxListRequestBytes
	case typ == "create_data_request":
		return maxMetadataRequestBytes
	}
	return maxSmallRequestBytes
}
