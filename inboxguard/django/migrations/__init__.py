"""Migrations of the inboxguard Django app."""
