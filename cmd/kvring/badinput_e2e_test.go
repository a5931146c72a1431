package main

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/client"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// rawBadInput sends malformed requests with the raw gRPC API (the SDK never
// sends them) and checks each gets the right code and names the problem.
func rawBadInput(t *testing.T, ctx context.Context, addr string, good *client.Client) {
	t.Helper()
	fp, err := good.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cache := kvringv1.NewCacheClient(cc)
	ref := &kvringv1.NamespaceRef{Name: "e2e/llama", Fingerprint: fp}
	id := make([]byte, 32)

	put := func(begin *kvringv1.PutBegin, frames []*kvringv1.DataFrame, end bool) error {
		stream, err := cache.Put(ctx)
		if err != nil {
			return err
		}
		if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: begin}}); err != nil {
			return err
		}
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		_ = m
		for _, f := range frames {
			if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: f}}); err != nil {
				break
			}
		}
		if end {
			stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}})
		}
		stream.CloseSend()
		for {
			if _, err := stream.Recv(); err != nil {
				if strings.Contains(err.Error(), "EOF") {
					return nil
				}
				return err
			}
		}
	}
	cases := []struct {
		name string
		err  error
		code codes.Code
		want string
	}{
		{"id of 31 bytes", put(&kvringv1.PutBegin{Namespace: ref, Chunks: []*kvringv1.ChunkRef{{Id: id[:31], Size: 10}}}, nil, true),
			codes.InvalidArgument, "chunks[0].id"},
		{"stream ends early", put(&kvringv1.PutBegin{Namespace: ref, Chunks: []*kvringv1.ChunkRef{{Id: id, Size: 10000}}},
			[]*kvringv1.DataFrame{{Index: 0, Offset: 0, Data: make([]byte, 5000)}}, false),
			codes.InvalidArgument, "ended before"},
		{"frame at a wrong offset", put(&kvringv1.PutBegin{Namespace: ref, Chunks: []*kvringv1.ChunkRef{{Id: id, Size: 10000}}},
			[]*kvringv1.DataFrame{{Index: 0, Offset: 7, Data: make([]byte, 5000)}}, true),
			codes.InvalidArgument, "offset"},
		{"wrong fingerprint", put(&kvringv1.PutBegin{Namespace: &kvringv1.NamespaceRef{Name: "e2e/llama", Fingerprint: make([]byte, 32)},
			Chunks: []*kvringv1.ChunkRef{{Id: id, Size: 10}}}, nil, true),
			codes.FailedPrecondition, "fingerprint"},
		{"unregistered namespace", put(&kvringv1.PutBegin{Namespace: &kvringv1.NamespaceRef{Name: "nobody", Fingerprint: fp},
			Chunks: []*kvringv1.ChunkRef{{Id: id, Size: 10}}}, nil, true),
			codes.FailedPrecondition, "not registered"},
	}
	_, lerr := cache.Lookup(ctx, &kvringv1.LookupRequest{Namespace: ref, Ids: [][]byte{id[:5]}})
	cases = append(cases, struct {
		name string
		err  error
		code codes.Code
		want string
	}{"lookup id of 5 bytes", lerr, codes.InvalidArgument, "ids[0]"})
	for _, c := range cases {
		if status.Code(c.err) != c.code || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want %v naming %q", c.name, c.err, c.code, c.want)
		}
	}
}
