"""The admin, for the tests that drive it through Django's test client."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
