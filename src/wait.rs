//! Thread-pool waits (`TP_WAIT`).
