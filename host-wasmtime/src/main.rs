fn main() {
    println!("rota {}", env!("CARGO_PKG_VERSION"));
}
