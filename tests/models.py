from django.db import models


class Execution(models.Model):
    """One run of a fixture task, written by the task itself."""

    kind = models.CharField(max_length=50)
    value = models.CharField(max_length=200)
    pid = models.IntegerField()
    at = models.FloatField()

    class Meta:
        db_table = "tests_execution"

    def __str__(self) -> str:
        return f"{self.kind}={self.value}"


class Order(models.Model):
    """Application data enqueued alongside jobs in one transaction."""

    reference = models.CharField(max_length=50)

    class Meta:
        db_table = "tests_order"

    def __str__(self) -> str:
        return self.reference
