"""The outbox's statements per database (being folded into ``sql.dialects``)."""
