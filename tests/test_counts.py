import pytest

from later_django.counts import fold, stage_counts
from later_django.models import StageCount, StageCountDelta
from tests import tasks
from tests.db_state import index_stage_counts

pytestmark = pytest.mark.django_db(transaction=True)


def test_stage_counts_equal_the_index_before_and_after_folding():
    for i in range(5):
        tasks.add.enqueue(i, i)
    tasks.add.enqueue_many([((1, 2), {})] * 3)
    expected = {"enqueued": 8}
    assert {k: v for k, v in stage_counts("tests").items() if v} == expected
    fold()
    assert not StageCountDelta.objects.exists()
    assert {k: v for k, v in stage_counts("tests").items() if v} == expected
    assert index_stage_counts("tests") == expected


def test_postgresql_triggers_append_deltas_instead_of_locking_the_totals(vendor):
    tasks.add.enqueue(1, 1)
    if vendor == "postgresql":
        assert list(StageCountDelta.objects.values_list("stage", "delta")) == [("enqueued", 1)]
        assert not StageCount.objects.filter(count__gt=0).exists()
        fold()
        assert StageCount.objects.get(namespace="tests", stage="enqueued").count == 1
    else:
        assert not StageCountDelta.objects.exists()
        assert StageCount.objects.get(namespace="tests", stage="enqueued").count == 1
