//! Cleanup groups (`TP_CLEANUP_GROUP`).
