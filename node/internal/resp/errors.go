package resp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

var (
	// ErrNoNamespace: a read of a namespace nobody has written.
	ErrNoNamespace = errors.New("resp: no such namespace")
	// ErrNamespaceLimit: a key's namespace cannot be created, the node
	// holds as many as it may (a write falls back to the default
	// namespace).
	ErrNamespaceLimit = errors.New("resp: the node's namespace limit is reached")
	// ErrBadToken: AUTH with a token the node does not accept.
	ErrBadToken = errors.New("resp: invalid token")

	errEmptyValue = errors.New("kvring stores no empty values")
	// errRefused: a value the command's checks refuse before it is read;
	// the command's own reply says why.
	errRefused = errors.New("the command was refused")
	errTooBig  = errors.New("value too big")
	// errOtherBytes: a SET of a key that holds other bytes (values are
	// immutable).
	errOtherBytes = errors.New("kvring")
	// errValueTooLarge: a value over the node's largest chunk, read past.
	errValueTooLarge = errors.New("value too large")
	// errKept: a value not read into memory because its key is stored
	// already as its namespace asks (Cluster.Kept); the write has nothing
	// to do.
	errKept = errors.New("the key is stored already")
	// errGoneMeanwhile: a value skipped as kept whose chunk was evicted
	// before the command ran; the client should send it again.
	errGoneMeanwhile = fmt.Errorf("%w: the key was evicted while its value arrived; send it again", transfer.ErrUnavailable)
)

// Error reply prefixes clients act on (Redis's own).
const (
	prefixErr       = "ERR"
	prefixOOM       = "OOM"
	prefixTryAgain  = "TRYAGAIN"
	prefixNoAuth    = "NOAUTH"
	prefixNoPerm    = "NOPERM"
	prefixWrongPass = "WRONGPASS"
)

// errorReply turns an error of the cluster or the store into an error reply
// with the prefix a Redis client acts on, and the reason (a metric label).
func errorReply(err error) (msg, reason string) {
	switch {
	case errors.Is(err, store.ErrNoSpace), errors.Is(err, transfer.ErrResourceExhausted), errors.Is(err, errTooBig):
		return prefixOOM + " " + oneLine(err), "no_space"
	case errors.Is(err, errEmptyValue):
		return prefixErr + " " + oneLine(err), "empty_value"
	case errors.Is(err, errOtherBytes):
		return prefixErr + " " + oneLine(err), "other_bytes"
	case errors.Is(err, errValueTooLarge):
		return prefixErr + " " + oneLine(err), "value_too_large"
	case errors.Is(err, transfer.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return prefixTryAgain + " " + oneLine(err), "unavailable"
	case errors.Is(err, transfer.ErrInvalidArgument):
		return prefixErr + " " + oneLine(err), "invalid"
	case errors.Is(err, ErrNamespaceLimit): // not even the default namespace could be created
		return prefixErr + " " + oneLine(err), "namespace_limit"
	}
	return prefixErr + " " + oneLine(err), "internal"
}

// oneLine makes err's text fit an error reply (no CR or LF).
func oneLine(err error) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(err.Error())
}

func errorf(prefix, format string, args ...any) string {
	return prefix + " " + fmt.Sprintf(format, args...)
}

// resultReply is the error reply of a chunk the cluster did not store (its
// result is REJECTED or FAILED), by the domain error its code stands for
// (transfer.CodeError).
func resultReply(r *kvringv1.PutChunkResult) (msg, reason string) {
	why := strings.NewReplacer("\r", " ", "\n", " ").Replace(r.GetReason())
	if why == "" {
		why = r.GetStatus().String()
	}
	switch err := transfer.CodeError(r.GetCode()); {
	case errors.Is(err, transfer.ErrResourceExhausted):
		return prefixOOM + " not stored: " + why, "no_space"
	case errors.Is(err, transfer.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return prefixTryAgain + " not stored: " + why, "unavailable"
	}
	return prefixErr + " not stored: " + why, "not_stored"
}
