//! Compiles `proto/helloworld.proto` with protox (a protobuf compiler in
//! Rust) and tonic-prost-build (the client and server code).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = protox::compile(["helloworld.proto"], ["proto"])?;
    tonic_prost_build::configure().compile_fds(files)?;
    println!("cargo:rerun-if-changed=proto/helloworld.proto");
    Ok(())
}
