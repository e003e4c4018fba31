//! watchd's native gRPC API (`proto/watchd.proto`).
