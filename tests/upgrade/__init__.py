"""A project that runs on a released later_django and is then upgraded to this checkout.

``tests/test_upgrade.py`` copies this package out of the checkout (as
``later_upgrade``) and runs it first under the release installed in a fresh
virtual environment, then under this checkout's code. So every module here
must work with both: use only what the oldest release tested still offers.
"""
