"""scikit-learn's own estimator checks on a SuperLearner regressor and classifier.

Tiny base estimators and the serial scheduler keep this fast.  Checks that
cannot apply are listed in ``EXPECTED_FAILED`` with the reason.
"""

from __future__ import annotations

from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from labkit.ensemble import SuperLearner


def regressor():
    return (SuperLearner(folds=3).add([LinearRegression(), ("ridge", Ridge(alpha=0.5))])
            .add_meta(LinearRegression()))


def classifier():
    return (SuperLearner(folds=3)
            .add([LogisticRegression(max_iter=200),
                  ("tree", DecisionTreeClassifier(max_depth=4, random_state=0))], proba=True)
            .add_meta(LogisticRegression(max_iter=200)))


# Every check applies and passes (scikit-learn 1.9.1): none is expected to fail.  A
# check that cannot apply goes here as {name: reason}.
EXPECTED_FAILED: dict = {}


def expected_failed(estimator):
    return EXPECTED_FAILED


@parametrize_with_checks([regressor(), classifier()], expected_failed_checks=expected_failed)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
