from django.contrib import admin, messages
from django.db import transaction

from .models import Order
from .tasks import send_confirmation


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["reference", "email", "confirmed_at"]
    actions = ["resend_confirmation"]

    @admin.action(description="Send the confirmation e-mail again")
    def resend_confirmation(self, request, queryset):
        with transaction.atomic():
            for order in queryset:
                send_confirmation.enqueue(order.pk)
        messages.success(request, f"{queryset.count()} confirmation(s) queued.")
