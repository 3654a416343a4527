//! Thread-pool I/O (`TP_IO`).
