"""The business data: one row per applied payment (not unique on purpose:
only the inbox keeps a redelivered payment from being applied twice)."""

from django.db import models


class Payment(models.Model):
    payment_id = models.CharField(max_length=255, db_index=True)
    account = models.CharField(max_length=64)
    amount = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.payment_id}: {self.amount} to {self.account}"
