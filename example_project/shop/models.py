from django.db import models


class Order(models.Model):
    reference = models.CharField(max_length=40, unique=True)
    email = models.EmailField()
    confirmed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.reference
