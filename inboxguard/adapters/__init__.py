"""Framework adapters. Each module imports its framework; the core never
imports an adapter, so ``import inboxguard`` pulls in no framework."""
