//! Thread-pool timers (`TP_TIMER`).
