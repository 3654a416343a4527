#[cfg(not(windows))] fn main() {} #[cfg(windows)] fn main() {}
