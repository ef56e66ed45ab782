"""Mass redistribution inside the correct set of a softmax policy (theory.md sections 5 and 6).

A policy is a vector of logits ``z`` over K actions with ``p = softmax(z)`` and a mask of the
correct actions C (see :mod:`fgrpo_theory.policy`). A group of N i.i.d. draws is given sparsely
(distinct sampled actions and their counts, never a K x N array). Rewards default to the
categorical simulation's R_c = +1, R_w = -1; pass ``r_correct=1, r_incorrect=0`` for the LLM
encoding. The step size is ``lr`` (eta in the paper).

Groups (:mod:`.groups`)
    Group, make_group, sample_group
Section-5 statistics and their first-order closed forms (:mod:`.statistics`)
    GroupStatistics, group_statistics, P17Terms, P10Terms,
    total_correct_change_p17 (P-17), unsampled_correct_change_p10 (P-10, Proposition 3.2)
Softmax changes after any logit step (:mod:`.softmax`)
    prob_change_first_order (P-18), subset_change_first_order (P-19),
    exact_prob_change, exact_subset_change, PROB_SUM_TOL
One update of one group (:mod:`.step`)
    StepSpec (rule "theory" (P-5), "linear", "logprob"; lr, gamma, rewards, advantage),
    logit_step, one_step, OneStepResult, RULES, QUANTITIES, REFERENCES
Closed-form expectations over the group draw (:mod:`.closed_forms`)
    expected_unsampled_square_mass (E[U2]), expected_sampled_mass_given_correct (Lemma H.1,
    P-24/P-25), expected_baseline_given_correct (Cor. H.2), LogprobDrift,
    expected_logprob_drift (theory.md section 6)
Expectations by enumeration or Monte Carlo (:mod:`.expectation`)
    expected_change, ExpectationResult, count_outcomes, log_count_outcomes, resolve_method,
    MAX_ENUMERATION, MAX_MONTE_CARLO_DRAWS, MAX_OUTCOME_DIGITS
The report of the ``mass`` command (:mod:`.report`)
    mass_report, REPORT_QUANTITIES
Bounds
    MAX_GROUP_SIZE (largest N, 2**20)
"""

from __future__ import annotations

from ._checks import MAX_GROUP_SIZE
from .closed_forms import (
    LogprobDrift,
    expected_baseline_given_correct,
    expected_logprob_drift,
    expected_sampled_mass_given_correct,
    expected_unsampled_square_mass,
)
from .expectation import (
    MAX_ENUMERATION,
    MAX_MONTE_CARLO_DRAWS,
    MAX_OUTCOME_DIGITS,
    ExpectationResult,
    count_outcomes,
    expected_change,
    log_count_outcomes,
    resolve_method,
)
from .groups import Group, make_group, sample_group
from .report import REPORT_QUANTITIES, mass_report
from .softmax import (
    PROB_SUM_TOL,
    exact_prob_change,
    exact_subset_change,
    prob_change_first_order,
    subset_change_first_order,
)
from .statistics import (
    GroupStatistics,
    P10Terms,
    P17Terms,
    group_statistics,
    total_correct_change_p17,
    unsampled_correct_change_p10,
)
from .step import QUANTITIES, REFERENCES, RULES, OneStepResult, StepSpec, logit_step, one_step

__all__ = [
    "RULES",
    "QUANTITIES",
    "REFERENCES",
    "MAX_GROUP_SIZE",
    "MAX_ENUMERATION",
    "MAX_MONTE_CARLO_DRAWS",
    "MAX_OUTCOME_DIGITS",
    "PROB_SUM_TOL",
    "Group",
    "make_group",
    "sample_group",
    "GroupStatistics",
    "group_statistics",
    "P17Terms",
    "P10Terms",
    "total_correct_change_p17",
    "unsampled_correct_change_p10",
    "StepSpec",
    "logit_step",
    "prob_change_first_order",
    "subset_change_first_order",
    "exact_prob_change",
    "exact_subset_change",
    "OneStepResult",
    "one_step",
    "expected_unsampled_square_mass",
    "expected_sampled_mass_given_correct",
    "expected_baseline_given_correct",
    "LogprobDrift",
    "expected_logprob_drift",
    "count_outcomes",
    "log_count_outcomes",
    "resolve_method",
    "ExpectationResult",
    "expected_change",
    "REPORT_QUANTITIES",
    "mass_report",
]
