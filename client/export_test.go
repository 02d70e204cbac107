package client

// grpcDialers are the gRPC transport's Dialers for the benchmarks against
// real nodes, which measure both transports. This package's own tests
// cannot import client/grpctransport (it imports this package); the
// external test file grpc_test.go can, and sets them in its init.
var grpcDialers map[string]Dialer

// SetGRPCDialers is for grpc_test.go only.
func SetGRPCDialers(d map[string]Dialer) { grpcDialers = d }
