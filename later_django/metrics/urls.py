"""``path("metrics/", include("later_django.metrics.urls"))`` serves the metrics there."""

from django.urls import path

from . import views

app_name = "later_metrics"

urlpatterns = [path("", views.metrics, name="metrics")]
