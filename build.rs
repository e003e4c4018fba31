//! Compiles watchd's gRPC API (`proto/watchd.proto`); needs `protoc` (Debian's
//! `protobuf-compiler`, installed by `scripts/install-deps.sh`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/watchd.proto");
    // The descriptors, for server reflection (grpcurl and the like need no .proto).
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("watchd_descriptor.bin"))
        .build_client(true)
        .build_server(true)
        // Object bytes are the cache's shared `Bytes`: sending them copies nothing.
        .bytes(".watchd.v1")
        // Labels in key order, as the cache keeps them: the same object encodes the same.
        .btree_map(".watchd.v1")
        .compile_protos(&["proto/watchd.proto"], &["proto"])?;
    Ok(())
}
