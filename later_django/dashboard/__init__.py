"""The operator's dashboard inside the Django admin (/admin/later/dashboard/).

``entry`` hooks the pages into the admin, ``views`` and ``actions`` are the
thin views, and the bounded reads live in ``overview``, ``listing`` and
``topics``. Templates and static files sit in the app's own ``templates/`` and
``static/`` directories so that ``INSTALLED_APPS = ["later_django"]`` is all a
project needs.
"""
