//! zen-engine
