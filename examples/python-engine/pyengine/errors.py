"""The one exception type that carries a CONTRACT decision to the gRPC layer."""

import grpc


class RuleError(Exception):
    """A request rejected by a CONTRACT rule.

    code: the grpc.StatusCode answered; rule: the rule ID that decided it (e.g. "SU-2", or
    "none" for a plain validation error); message: what was wrong, for the caller.
    """

    def __init__(self, code, rule, message):
        super().__init__(message)
        self.code = code
        self.rule = rule
        self.message = message

    def details(self):
        return "%s: %s" % (self.rule, self.message)


def invalid(rule, message):
    return RuleError(grpc.StatusCode.INVALID_ARGUMENT, rule, message)


def precondition(rule, message):
    return RuleError(grpc.StatusCode.FAILED_PRECONDITION, rule, message)


def unavailable(rule, message):
    return RuleError(grpc.StatusCode.UNAVAILABLE, rule, message)


def unimplemented(rule, message):
    return RuleError(grpc.StatusCode.UNIMPLEMENTED, rule, message)


def exhausted(rule, message):
    return RuleError(grpc.StatusCode.RESOURCE_EXHAUSTED, rule, message)
