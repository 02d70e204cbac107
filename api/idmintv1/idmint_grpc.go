package idmintv1

// Service glue for idmint.v1.IDs, in the shape protoc-gen-go-grpc generates
// (written by hand: that plugin is not on this project's module proxy).

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Full method names of the IDs service.
const (
	IDs_NextIDs_FullMethodName   = "/idmint.v1.IDs/NextIDs"
	IDs_NextRange_FullMethodName = "/idmint.v1.IDs/NextRange"
	IDs_Decode_FullMethodName    = "/idmint.v1.IDs/Decode"
	IDs_StreamIDs_FullMethodName = "/idmint.v1.IDs/StreamIDs"
)

// IDsClient is the client API of the IDs service. Safe for concurrent use.
type IDsClient interface {
	NextIDs(ctx context.Context, in *NextIDsRequest, opts ...grpc.CallOption) (*NextIDsResponse, error)
	NextRange(ctx context.Context, in *NextRangeRequest, opts ...grpc.CallOption) (*NextRangeResponse, error)
	Decode(ctx context.Context, in *DecodeRequest, opts ...grpc.CallOption) (*DecodeResponse, error)
	StreamIDs(ctx context.Context, in *StreamIDsRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[NextIDsResponse], error)
}

type idsClient struct{ cc grpc.ClientConnInterface }

// NewIDsClient returns a client of the IDs service over cc.
func NewIDsClient(cc grpc.ClientConnInterface) IDsClient { return &idsClient{cc} }

func (c *idsClient) NextIDs(ctx context.Context, in *NextIDsRequest, opts ...grpc.CallOption) (*NextIDsResponse, error) {
	out := new(NextIDsResponse)
	if err := c.cc.Invoke(ctx, IDs_NextIDs_FullMethodName, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idsClient) NextRange(ctx context.Context, in *NextRangeRequest, opts ...grpc.CallOption) (*NextRangeResponse, error) {
	out := new(NextRangeResponse)
	if err := c.cc.Invoke(ctx, IDs_NextRange_FullMethodName, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idsClient) Decode(ctx context.Context, in *DecodeRequest, opts ...grpc.CallOption) (*DecodeResponse, error) {
	out := new(DecodeResponse)
	if err := c.cc.Invoke(ctx, IDs_Decode_FullMethodName, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *idsClient) StreamIDs(ctx context.Context, in *StreamIDsRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[NextIDsResponse], error) {
	stream, err := c.cc.NewStream(ctx, &IDs_ServiceDesc.Streams[0], IDs_StreamIDs_FullMethodName, opts...)
	if err != nil {
		return nil, err
	}
	x := &grpc.GenericClientStream[StreamIDsRequest, NextIDsResponse]{ClientStream: stream}
	if err := x.ClientStream.SendMsg(in); err != nil {
		return nil, err
	}
	if err := x.ClientStream.CloseSend(); err != nil {
		return nil, err
	}
	return x, nil
}

// IDsServer is the server API of the IDs service. Embed
// UnimplementedIDsServer for forward compatibility.
type IDsServer interface {
	NextIDs(context.Context, *NextIDsRequest) (*NextIDsResponse, error)
	NextRange(context.Context, *NextRangeRequest) (*NextRangeResponse, error)
	Decode(context.Context, *DecodeRequest) (*DecodeResponse, error)
	StreamIDs(*StreamIDsRequest, grpc.ServerStreamingServer[NextIDsResponse]) error
}

// UnimplementedIDsServer answers Unimplemented to every call.
type UnimplementedIDsServer struct{}

func (UnimplementedIDsServer) NextIDs(context.Context, *NextIDsRequest) (*NextIDsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method NextIDs not implemented")
}
func (UnimplementedIDsServer) NextRange(context.Context, *NextRangeRequest) (*NextRangeResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method NextRange not implemented")
}
func (UnimplementedIDsServer) Decode(context.Context, *DecodeRequest) (*DecodeResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Decode not implemented")
}
func (UnimplementedIDsServer) StreamIDs(*StreamIDsRequest, grpc.ServerStreamingServer[NextIDsResponse]) error {
	return status.Error(codes.Unimplemented, "method StreamIDs not implemented")
}

// RegisterIDsServer registers srv on s.
func RegisterIDsServer(s grpc.ServiceRegistrar, srv IDsServer) {
	s.RegisterService(&IDs_ServiceDesc, srv)
}

func _IDs_NextIDs_Handler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(NextIDsRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IDsServer).NextIDs(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: IDs_NextIDs_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return srv.(IDsServer).NextIDs(ctx, req.(*NextIDsRequest))
	})
}

func _IDs_NextRange_Handler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(NextRangeRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IDsServer).NextRange(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: IDs_NextRange_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return srv.(IDsServer).NextRange(ctx, req.(*NextRangeRequest))
	})
}

func _IDs_Decode_Handler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(DecodeRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(IDsServer).Decode(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: IDs_Decode_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return srv.(IDsServer).Decode(ctx, req.(*DecodeRequest))
	})
}

func _IDs_StreamIDs_Handler(srv any, stream grpc.ServerStream) error {
	m := new(StreamIDsRequest)
	if err := stream.RecvMsg(m); err != nil {
		return err
	}
	return srv.(IDsServer).StreamIDs(m, &grpc.GenericServerStream[StreamIDsRequest, NextIDsResponse]{ServerStream: stream})
}

// IDs_ServiceDesc describes the IDs service for grpc.RegisterService.
var IDs_ServiceDesc = grpc.ServiceDesc{
	ServiceName: "idmint.v1.IDs",
	HandlerType: (*IDsServer)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "NextIDs", Handler: _IDs_NextIDs_Handler},
		{MethodName: "NextRange", Handler: _IDs_NextRange_Handler},
		{MethodName: "Decode", Handler: _IDs_Decode_Handler},
	},
	Streams: []grpc.StreamDesc{
		{StreamName: "StreamIDs", Handler: _IDs_StreamIDs_Handler, ServerStreams: true},
	},
	Metadata: "idmintv1/idmint.proto",
}
