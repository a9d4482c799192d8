// Generated from docs/openapi.json by openapi-typescript (npm run generate); do not edit.

export interface paths {
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Healthz
         * @description Liveness; the only route without a token, so it says nothing else.
         */
        get: operations["healthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Metrics */
        get: operations["getMetrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Readyz
         * @description Ready while the database answers, Redis answers (with ``cluster.redis_url``: a PING
         *     within 2 s), and the default provider (``selection.default``) or one of its fallbacks
         *     (``selection.fallback_chain``) is available (one that needs a login is not); each
         *     provider's entry is its cached health probe (``selection.probe_ttl_s``) with its
         *     credential looked for now.
         */
        get: operations["readyz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/providers": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List Providers
         * @description Every configured provider with its capabilities, versions, health and measured
         *     figures.
         */
        get: operations["listProviders"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/providers/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Provider */
        get: operations["getProvider"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/runs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Create Run
         * @description Select a provider, run one turn; a provider that fails for good hands over to the next.
         */
        post: operations["createRun"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List Sessions
         * @description Sessions, newest first (a non-admin key sees its own only); page with ``before`` = the
         *     last ``created_at`` you got, until a page is empty. A page may hold fewer than ``limit``
         *     sessions: it ends where it would pass ``limits.max_page_bytes``. ``status``,
         *     ``provider`` and ``q`` narrow it (all that are given must hold).
         */
        get: operations["listSessions"];
        put?: never;
        /**
         * Create Session
         * @description Create a session on a provider, in a workspace inside a configured root, or in a Git
         *     worktree of its own of a repository inside one (``repository``, ``ref``, ``branch``).
         */
        post: operations["createSession"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Session */
        get: operations["getSession"];
        put?: never;
        post?: never;
        /**
         * Delete Session
         * @description Close the session: stop its turn and its CLI process group; its history is kept. A
         *     session's worktree is removed (uncommitted changes in it are lost); its branch, with
         *     every commit on it, is kept in the repository (``branch``).
         */
        delete: operations["deleteSession"];
        options?: never;
        head?: never;
        /**
         * Configure Session
         * @description Change the session's model, approval mode or provider for its next turns (each field
         *     left out stays as it is): the agent's idle process is closed, and the next turn starts
         *     it again with the new settings, in the same thread. The provider changes only before
         *     the first turn. Told as ``session.configured``.
         */
        patch: operations["configureSession"];
        trace?: never;
    };
    "/v1/sessions/{session_id}/approvals": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List Approvals
         * @description Approvals, newest first; page with ``before`` = the last ``created_at`` you got, until
         *     a page is empty (a page ends early where it would pass ``limits.max_page_bytes``).
         */
        get: operations["listApprovals"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/approvals/{approval_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Respond Approval
         * @description Allow or deny a pending tool call (``allow_session`` also allows it for the session).
         */
        post: operations["respondApproval"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/changes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Changes
         * @description What changed in the workspace from one recorded state to another: by default from the
         *     first turn's start to now; ``from=T&to=T`` is what turn T changed.
         */
        get: operations["getChanges"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Events
         * @description Events after a cursor: a JSON page, or with ``Accept: text/event-stream`` a live SSE
         *     stream (browsers' EventSource may send the key as ``?access_token=``). A page holds up to
         *     ``limit`` events, fewer where it would pass ``limits.max_page_bytes`` (at least one):
         *     continue with ``after`` = ``next_after`` while it is below ``last_seq``.
         */
        get: operations["getEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/fork": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Fork Session
         * @description Fork the session at a completed turn (default its last): a new session of the same
         *     owner, provider and settings, in a new worktree (or copy) of its workspace, whose
         *     conversation holds the turns up to that one: the agent's own fork of its thread where
         *     the provider has one (``fork`` in its capabilities), else a hand-off told before the new
         *     session's first prompt. ``session.forked`` is told on both sessions.
         */
        post: operations["forkSession"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/interrupt": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Interrupt
         * @description Ask the agent to stop the running turn; it ends with ``turn.interrupted``.
         */
        post: operations["interruptTurn"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/questions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List Questions
         * @description The questions the agent asked in this session (``status=pending``: the open ones),
         *     newest first; page with ``before`` = the last ``created_at`` you got, until a page is
         *     empty (a page ends early where it would pass ``limits.max_page_bytes``).
         */
        get: operations["listQuestions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/questions/{question_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Answer Question
         * @description Answer the agent's pending question: one answer per question, in the order asked.
         */
        post: operations["answerQuestion"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/revert": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Revert
         * @description Put the workspace's files back as they were when turn ``to_turn`` started: changed
         *     files rewritten, files added since removed, ignored files left alone. Told as a
         *     ``session.reverted`` event, and to the agent at the start of its next prompt.
         */
        post: operations["revertSession"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/turns": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List Turns
         * @description Turns, newest first; page with ``before`` = the last ``number`` you got, until a page
         *     is empty (a page ends early where it would pass ``limits.max_page_bytes``).
         */
        get: operations["listTurns"];
        put?: never;
        /**
         * Create Turn
         * @description Start a turn; follow it on the event stream. One turn at a time per session (else 409).
         */
        post: operations["createTurn"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/turns/{turn_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Turn */
        get: operations["getTurn"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/usage": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Usage
         * @description Token counts and cost of the turns that ended in ``[from, to)``, by key, provider
         *     and model; ``from`` = ``to`` is the empty range (no groups, zero totals). ``budgets``:
         *     every key's budgets for the current UTC day and month, with what is used and left.
         */
        get: operations["getUsage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/webhooks": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List Webhooks
         * @description Every endpoint: those of the configuration, then those added here.
         */
        get: operations["listWebhooks"];
        put?: never;
        /**
         * Create Webhook
         * @description Add an endpoint for the event types it names (and, with ``keys``, only those keys'
         *     sessions). Without ``secret`` the gateway makes one and returns it here, once.
         */
        post: operations["createWebhook"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/webhooks/{webhook_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Webhook */
        get: operations["getWebhook"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/webhooks/{webhook_id}/deliveries": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List Webhook Deliveries
         * @description The endpoint's deliveries, newest first: status, attempts, the last answer or error
         *     (never a secret); page with ``before`` = the last ``created_at`` you got.
         */
        get: operations["listWebhookDeliveries"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/webhooks/{webhook_id}/disable": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Disable Webhook
         * @description Stop sending to the endpoint; its pending deliveries are cancelled.
         */
        post: operations["disableWebhook"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/webhooks/{webhook_id}/enable": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Enable Webhook
         * @description Send to the endpoint again (events stored from now on).
         */
        post: operations["enableWebhook"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/webhooks/{webhook_id}/secret": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Rotate Webhook Secret
         * @description Sign with a new secret from now on, and (``keep_previous``) with the old ones too
         *     until the receiver has the new one: a rotation without a refused delivery.
         */
        post: operations["rotateWebhookSecret"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/webhooks/{webhook_id}/test": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Test Webhook
         * @description Send the endpoint a signed ``webhook.test`` message (through the outbox, like any other:
         *     its delivery shows in the endpoint's log).
         */
        post: operations["testWebhook"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** ApprovalList */
        ApprovalList: {
            /** Approvals */
            approvals: components["schemas"]["ApprovalPublic"][];
        };
        /** ApprovalOption */
        ApprovalOption: {
            /**
             * Decision
             * @enum {string}
             */
            decision: "allow" | "deny" | "allow_session";
            /** Label */
            label: string;
        };
        /** ApprovalPublic */
        ApprovalPublic: {
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Decided At */
            decided_at?: string | null;
            /** Decided By */
            decided_by?: string | null;
            /** Decision */
            decision?: ("allow" | "deny" | "allow_session") | null;
            /**
             * Expires At
             * Format: date-time
             */
            expires_at: string;
            /** Id */
            id: string;
            /** Input */
            input: {
                [key: string]: components["schemas"]["JsonValue"];
            };
            /** Message */
            message?: string | null;
            /** Session Id */
            session_id: string;
            /**
             * Status
             * @enum {string}
             */
            status: "pending" | "allowed" | "denied" | "expired" | "cancelled";
            /** Title */
            title?: string | null;
            /** Tool */
            tool: string;
            /** Turn Id */
            turn_id: string | null;
            /** Updated By */
            updated_by?: string | null;
            /** Updated Input */
            updated_input?: {
                [key: string]: components["schemas"]["JsonValue"];
            } | null;
        };
        /** ApprovalRequested */
        ApprovalRequested: {
            /** Approval Id */
            approval_id: string;
            /**
             * Expires At
             * Format: date-time
             */
            expires_at: string;
            /** Input */
            input: {
                [key: string]: components["schemas"]["JsonValue"];
            };
            /** Options */
            options: components["schemas"]["ApprovalOption"][];
            /** Title */
            title?: string | null;
            /** Tool */
            tool: string;
            /** Tool Id */
            tool_id?: string | null;
        };
        /** ApprovalRequestedEvent */
        ApprovalRequestedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["ApprovalRequested"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "approval.requested";
        };
        /** ApprovalResolved */
        ApprovalResolved: {
            /** Approval Id */
            approval_id: string;
            /**
             * By
             * @enum {string}
             */
            by: "client" | "policy" | "gateway";
            /**
             * Decision
             * @enum {string}
             */
            decision: "allow" | "deny" | "allow_session";
            /** Message */
            message?: string | null;
            /**
             * Reason
             * @enum {string}
             */
            reason: "decided" | "expired" | "cancelled" | "session_closed" | "gateway_restart" | "replica_lost";
            /** Updated By */
            updated_by?: string | null;
            /** Updated Input */
            updated_input?: {
                [key: string]: components["schemas"]["JsonValue"];
            } | null;
        };
        /** ApprovalResolvedEvent */
        ApprovalResolvedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["ApprovalResolved"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "approval.resolved";
        };
        /** ApprovalRespond */
        ApprovalRespond: {
            /**
             * Decision
             * @enum {string}
             */
            decision: "allow" | "deny" | "allow_session";
            /** Message */
            message?: string | null;
            /** Updated Input */
            updated_input?: {
                [key: string]: components["schemas"]["JsonValue"];
            } | null;
        };
        /** BudgetAmounts */
        BudgetAmounts: {
            /** Cost Usd */
            cost_usd: number | null;
            /** Tokens */
            tokens: number | null;
        };
        /**
         * BudgetIn
         * @description What a session may spend in all, by cost and/or tokens (input plus output); a turn
         *     that would start over it is refused (402 ``budget_exceeded``), one that crosses it is
         *     stopped at its next usage report (``turn.failed``, kind ``budget_exceeded``).
         */
        BudgetIn: {
            /** Max Cost Usd */
            max_cost_usd?: number | null;
            /** Max Tokens */
            max_tokens?: number | null;
        };
        /**
         * BudgetReached
         * @description A budget is spent: what the session (or its key, this day or month) used has reached
         *     its maximum. A turn still running is stopped (``turn.failed``, ``budget_exceeded``) and
         *     later turns are refused until the budget resets (a session's never does).
         */
        BudgetReached: {
            /**
             * Budget
             * @enum {string}
             */
            budget: "session" | "key_daily" | "key_monthly";
            /** Key */
            key?: string | null;
            /** Limit */
            limit: number;
            /**
             * Measure
             * @enum {string}
             */
            measure: "cost_usd" | "tokens";
            /** Resets At */
            resets_at?: string | null;
            /** Used */
            used: number;
        };
        /** BudgetReachedEvent */
        BudgetReachedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["BudgetReached"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "budget.reached";
        };
        /**
         * CandidateScore
         * @description How the routing strategy rated one candidate that could serve (lower is better).
         */
        CandidateScore: {
            /**
             * Exploring
             * @default false
             */
            exploring: boolean;
            /** Provider */
            provider: string;
            /** Score */
            score: number | null;
            /** Turns */
            turns: number;
        };
        /** CapabilitiesPublic */
        CapabilitiesPublic: {
            /** Approval Edits */
            approval_edits: boolean;
            /** Approvals */
            approvals: boolean;
            /** Cost */
            cost: boolean;
            /**
             * Fork
             * @default false
             */
            fork: boolean;
            /** Interrupt */
            interrupt: boolean;
            /** Model Choice */
            model_choice: boolean;
            /** Resume */
            resume: boolean;
            /** Shared Process */
            shared_process: boolean;
            /** Text Deltas */
            text_deltas: boolean;
            /** Usage */
            usage: boolean;
        };
        /**
         * ChangedFile
         * @description One file that differs between two states of a workspace.
         */
        ChangedFile: {
            /** Additions */
            additions: number;
            /** Binary */
            binary: boolean;
            /** Deletions */
            deletions: number;
            /** Old Path */
            old_path?: string | null;
            /** Path */
            path: string;
            /**
             * Status
             * @enum {string}
             */
            status: "added" | "modified" | "deleted" | "renamed";
        };
        /**
         * ChangesPublic
         * @description The files that differ between two states of the workspace, and their unified diff.
         */
        ChangesPublic: {
            /** Additions */
            additions: number;
            /** Deletions */
            deletions: number;
            /** Diff */
            diff: string;
            /**
             * Diff Truncated
             * @default false
             */
            diff_truncated: boolean;
            /** Files */
            files: components["schemas"]["ChangedFile"][];
            /** From */
            from: string;
            /** Session Id */
            session_id: string;
            /** To */
            to: string;
        };
        /**
         * ChangesSummary
         * @description What a turn changed in its workspace, in short (``GET …/changes`` has the files).
         */
        ChangesSummary: {
            /** Additions */
            additions: number;
            /** Deletions */
            deletions: number;
            /** Files */
            files: number;
        };
        /**
         * EventPage
         * @description A page of a session's events; pass ``next_after`` as ``after`` for the next page.
         */
        EventPage: {
            /** Events */
            events: (components["schemas"]["SessionCreatedEvent"] | components["schemas"]["SessionProviderSelectedEvent"] | components["schemas"]["SessionThreadBoundEvent"] | components["schemas"]["SessionForkedEvent"] | components["schemas"]["SessionClosedEvent"] | components["schemas"]["SessionRevertedEvent"] | components["schemas"]["SessionConfiguredEvent"] | components["schemas"]["TurnStartedEvent"] | components["schemas"]["TurnCompletedEvent"] | components["schemas"]["TurnFailedEvent"] | components["schemas"]["TurnInterruptedEvent"] | components["schemas"]["MessageDeltaEvent"] | components["schemas"]["MessageCompletedEvent"] | components["schemas"]["ReasoningDeltaEvent"] | components["schemas"]["ReasoningCompletedEvent"] | components["schemas"]["ToolStartedEvent"] | components["schemas"]["ToolOutputEvent"] | components["schemas"]["ToolCompletedEvent"] | components["schemas"]["PlanUpdatedEvent"] | components["schemas"]["ApprovalRequestedEvent"] | components["schemas"]["ApprovalResolvedEvent"] | components["schemas"]["QuestionAskedEvent"] | components["schemas"]["QuestionResolvedEvent"] | components["schemas"]["RetryScheduledEvent"] | components["schemas"]["ProviderSwitchedEvent"] | components["schemas"]["BudgetReachedEvent"] | components["schemas"]["UsageEvent"] | components["schemas"]["WarningEvent"])[];
            /** Last Seq */
            last_seq: number;
            /** Next After */
            next_after: number;
        };
        /**
         * FieldProblem
         * @description One field of a request that failed validation.
         */
        FieldProblem: {
            /** Location */
            location: string;
            /** Message */
            message: string;
        };
        /**
         * FiguresPublic
         * @description What this replica measured of the provider's last ``selection.window_turns`` turns
         *     (null: not measured yet); the routing strategies rank providers by these.
         */
        FiguresPublic: {
            /** Cost Per Turn Usd */
            cost_per_turn_usd: number | null;
            /** Duration P50 S */
            duration_p50_s: number | null;
            /** Failure Rate */
            failure_rate: number | null;
            /** First Text P50 S */
            first_text_p50_s: number | null;
            /** Running */
            running: number;
            /** Turns */
            turns: number;
        };
        /**
         * HandoffSize
         * @description How much of the conversation a failover handed to the new agent.
         */
        HandoffSize: {
            /** Chars */
            chars: number;
            /** Turns */
            turns: number;
        };
        /** HealthPublic */
        HealthPublic: {
            /** Available */
            available: boolean;
            /**
             * Checked At
             * Format: date-time
             */
            checked_at: string;
            /** Reason */
            reason: string | null;
            /**
             * Status
             * @enum {string}
             */
            status: "available" | "needs_login" | "unavailable";
        };
        /** InterruptAccepted */
        InterruptAccepted: {
            /** Session Id */
            session_id: string;
            /**
             * Status
             * @default interrupting
             * @constant
             */
            status: "interrupting";
            /** Turn Id */
            turn_id: string;
        };
        JsonValue: unknown;
        /**
         * KeyBudgetPublic
         * @description One key's budget for the current calendar day or month (UTC).
         */
        KeyBudgetPublic: {
            /** Key */
            key: string;
            left: components["schemas"]["BudgetAmounts"];
            /** Max Cost Usd */
            max_cost_usd?: number | null;
            /** Max Tokens */
            max_tokens?: number | null;
            /**
             * Period
             * @enum {string}
             */
            period: "daily" | "monthly";
            /** Reached */
            reached: boolean;
            /**
             * Resets At
             * Format: date-time
             */
            resets_at: string;
            used: components["schemas"]["BudgetAmounts"];
        };
        /**
         * LimitEnforcement
         * @description How every CLI's ``limits.max_process_rss_bytes`` and ``limits.max_process_count`` are
         *     enforced (``limits.enforcement``): ``cgroup`` (by the kernel, for the CLI's whole tree),
         *     ``rlimit`` (memory only: each process's private writable memory, by the kernel) or
         *     ``watchdog`` (sampled from ``/proc`` every ``limits.watch_interval_s``).
         */
        LimitEnforcement: {
            /** Detail */
            detail: string;
            /**
             * Memory
             * @enum {string}
             */
            memory: "cgroup" | "rlimit" | "watchdog";
            /**
             * Processes
             * @enum {string}
             */
            processes: "cgroup" | "rlimit" | "watchdog";
        };
        /** Liveness */
        Liveness: {
            /**
             * Status
             * @constant
             */
            status: "ok";
        };
        /** MessageCompleted */
        MessageCompleted: {
            /** Message Id */
            message_id: string;
            /** Text */
            text: string;
        };
        /** MessageCompletedEvent */
        MessageCompletedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["MessageCompleted"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "message.completed";
        };
        /**
         * MessageDelta
         * @description Text the CLI streamed for this item: one delta as printed, or several that came
         *     within ``server.coalesce_deltas_ms`` of each other, joined.
         */
        MessageDelta: {
            /** Message Id */
            message_id: string;
            /** Text */
            text: string;
        };
        /** MessageDeltaEvent */
        MessageDeltaEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["MessageDelta"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "message.delta";
        };
        /**
         * PlanEntry
         * @description One step of the agent's plan.
         */
        PlanEntry: {
            /**
             * Status
             * @enum {string}
             */
            status: "pending" | "in_progress" | "completed";
            /** Text */
            text: string;
        };
        /**
         * PlanUpdated
         * @description The agent's plan for the turn, whole each time it changes.
         */
        PlanUpdated: {
            /** Entries */
            entries: components["schemas"]["PlanEntry"][];
        };
        /** PlanUpdatedEvent */
        PlanUpdatedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["PlanUpdated"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "plan.updated";
        };
        /**
         * Problem
         * @description An ``application/problem+json`` error (RFC 9457); extra fields vary by ``type``.
         */
        Problem: {
            /** Detail */
            detail: string;
            /** Status */
            status: number;
            /** Title */
            title: string;
            /** Type */
            type: string;
        } & {
            [key: string]: unknown;
        };
        /**
         * ProcessPublic
         * @description The live CLI process serving the session (absent when none is running).
         */
        ProcessPublic: {
            /** Pid */
            pid: number;
            /** Spawns */
            spawns: number;
            /**
             * Started At
             * Format: date-time
             */
            started_at: string;
        };
        /** ProviderList */
        ProviderList: {
            /** Providers */
            providers: components["schemas"]["ProviderPublic"][];
        };
        /** ProviderPublic */
        ProviderPublic: {
            capabilities: components["schemas"]["CapabilitiesPublic"] | null;
            /** Enabled */
            enabled: boolean;
            /** Executable */
            executable: string;
            figures: components["schemas"]["FiguresPublic"];
            health: components["schemas"]["HealthPublic"];
            /** Installed Version */
            installed_version: string | null;
            /** Name */
            name: string;
            /** Pinned Version */
            pinned_version: string | null;
            sandbox: components["schemas"]["SandboxPublic"];
        };
        /** ProviderSwitch */
        ProviderSwitch: {
            /** From Provider */
            from_provider: string;
            /** Reason */
            reason: string;
            /** To Provider */
            to_provider: string;
        };
        /**
         * ProviderSwitched
         * @description The session moved to another provider: a fresh thread there, whose first prompt is a
         *     hand-off of the conversation so far (``handoff``) when there was one.
         */
        ProviderSwitched: {
            /** From Provider */
            from_provider: string;
            handoff?: components["schemas"]["HandoffSize"] | null;
            /** Message */
            message?: string | null;
            /** Reason */
            reason: string;
            /** To Provider */
            to_provider: string;
        };
        /** ProviderSwitchedEvent */
        ProviderSwitchedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["ProviderSwitched"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "provider.switched";
        };
        /**
         * Question
         * @description One question the agent asks; it is answered with offered labels and/or free text.
         */
        Question: {
            /**
             * Free Text
             * @default true
             */
            free_text: boolean;
            /** Header */
            header?: string | null;
            /**
             * Multi Select
             * @default false
             */
            multi_select: boolean;
            /**
             * Options
             * @default []
             */
            options: components["schemas"]["QuestionOption"][];
            /** Prompt */
            prompt: string;
        };
        /**
         * QuestionAnswer
         * @description The answer to one question: the offered labels chosen, and/or text of the user's own.
         */
        QuestionAnswer: {
            /**
             * Selected
             * @default []
             */
            selected: string[];
            /** Text */
            text?: string | null;
        };
        /**
         * QuestionAnswerIn
         * @description The answer to one question: offered labels chosen (``selected``; one unless the
         *     question is ``multi_select``) and/or an answer of the user's own (``text``, where the
         *     question is ``free_text``).
         */
        QuestionAnswerIn: {
            /**
             * Selected
             * @default []
             */
            selected: string[];
            /** Text */
            text?: string | null;
        };
        /**
         * QuestionAsked
         * @description The agent asks the user; answer with ``POST …/questions/{question_id}`` (one answer per
         *     question, in order) before ``expires_at``.
         */
        QuestionAsked: {
            /**
             * Expires At
             * Format: date-time
             */
            expires_at: string;
            /** Question Id */
            question_id: string;
            /** Questions */
            questions: components["schemas"]["Question"][];
            /** Tool Id */
            tool_id?: string | null;
        };
        /** QuestionAskedEvent */
        QuestionAskedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["QuestionAsked"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "question.asked";
        };
        /** QuestionList */
        QuestionList: {
            /** Questions */
            questions: components["schemas"]["QuestionPublic"][];
        };
        /**
         * QuestionOption
         * @description One answer the agent offers to a question.
         */
        QuestionOption: {
            /** Description */
            description?: string | null;
            /** Label */
            label: string;
        };
        /** QuestionPublic */
        QuestionPublic: {
            /** Answered By */
            answered_by?: string | null;
            /** Answers */
            answers?: components["schemas"]["QuestionAnswer"][] | null;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /**
             * Expires At
             * Format: date-time
             */
            expires_at: string;
            /** Id */
            id: string;
            /** Questions */
            questions: components["schemas"]["Question"][];
            /** Resolved At */
            resolved_at?: string | null;
            /** Session Id */
            session_id: string;
            /**
             * Status
             * @enum {string}
             */
            status: "pending" | "answered" | "expired" | "cancelled";
            /** Tool */
            tool: string;
            /** Turn Id */
            turn_id: string | null;
        };
        /**
         * QuestionReply
         * @description One answer per question of ``question.asked``, in the order asked.
         */
        QuestionReply: {
            /** Answers */
            answers: components["schemas"]["QuestionAnswerIn"][];
        };
        /**
         * QuestionResolved
         * @description A question's end: answered by a client, or ended by the gateway (no answers).
         */
        QuestionResolved: {
            /** Answered By */
            answered_by?: string | null;
            /** Answers */
            answers: components["schemas"]["QuestionAnswer"][] | null;
            /**
             * By
             * @enum {string}
             */
            by: "client" | "gateway";
            /** Question Id */
            question_id: string;
            /**
             * Reason
             * @enum {string}
             */
            reason: "answered" | "expired" | "cancelled" | "session_closed" | "gateway_restart" | "replica_lost";
        };
        /** QuestionResolvedEvent */
        QuestionResolvedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["QuestionResolved"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "question.resolved";
        };
        /** Readiness */
        Readiness: {
            /** Checks */
            checks: {
                [key: string]: string;
            };
            limits?: components["schemas"]["LimitEnforcement"] | null;
            /**
             * Reasons
             * @default []
             */
            reasons: string[];
            /**
             * Status
             * @enum {string}
             */
            status: "ready" | "not_ready";
        };
        /** ReasoningCompleted */
        ReasoningCompleted: {
            /** Message Id */
            message_id: string;
            /** Text */
            text: string;
        };
        /** ReasoningCompletedEvent */
        ReasoningCompletedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["ReasoningCompleted"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "reasoning.completed";
        };
        /**
         * ReasoningDelta
         * @description Text the CLI streamed for this item: one delta as printed, or several that came
         *     within ``server.coalesce_deltas_ms`` of each other, joined.
         */
        ReasoningDelta: {
            /** Message Id */
            message_id: string;
            /** Text */
            text: string;
        };
        /** ReasoningDeltaEvent */
        ReasoningDeltaEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["ReasoningDelta"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "reasoning.delta";
        };
        /** RetryPolicyIn */
        RetryPolicyIn: {
            /** Enabled */
            enabled?: boolean | null;
            /** Strategy */
            strategy?: string | null;
            /** Usage Limit */
            usage_limit?: ("wait" | "fallback" | "fail") | null;
            /** Usage Limit Max Wait S */
            usage_limit_max_wait_s?: number | null;
        };
        /**
         * RetryPolicyPublic
         * @description The retry policy fixed when the turn was created; configuration changed since does not
         *     touch it.
         */
        RetryPolicyPublic: {
            /** Delays S */
            delays_s: number[];
            /** Enabled */
            enabled: boolean;
            /** Max Attempts */
            max_attempts: number;
            /** Strategy */
            strategy: string;
            /**
             * Usage Limit
             * @enum {string}
             */
            usage_limit: "wait" | "fallback" | "fail";
            /** Usage Limit Max Wait S */
            usage_limit_max_wait_s: number;
        };
        /** RetryScheduled */
        RetryScheduled: {
            /** Attempt */
            attempt: number;
            /** Delay S */
            delay_s: number | null;
            /**
             * Kind
             * @enum {string}
             */
            kind: "rate_limited" | "overloaded" | "server_error" | "network" | "idle_timeout" | "auth" | "invalid_request" | "context_lost" | "cli_missing" | "cli_crashed" | "interrupted" | "usage_limit" | "agent_error" | "resource_limit" | "budget_exceeded" | "unknown";
            /** Max Attempts */
            max_attempts: number | null;
            /** Message */
            message?: string | null;
            /** Resume At */
            resume_at?: string | null;
            /**
             * Source
             * @enum {string}
             */
            source: "cli" | "gateway";
        };
        /** RetryScheduledEvent */
        RetryScheduledEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["RetryScheduled"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "retry.scheduled";
        };
        /** RevertCreate */
        RevertCreate: {
            /** To Turn */
            to_turn: string;
        };
        /** RevertPublic */
        RevertPublic: {
            /** Additions */
            additions: number;
            /** Deletions */
            deletions: number;
            /** Files */
            files: components["schemas"]["ChangedFile"][];
            /** Session Id */
            session_id: string;
            /** To Turn */
            to_turn: string;
            /** Turn Number */
            turn_number: number;
        };
        /** RunCreate */
        RunCreate: {
            /** Approval Mode */
            approval_mode?: ("ask" | "auto_edits" | "allow_all" | "read_only") | null;
            budget?: components["schemas"]["BudgetIn"] | null;
            /** Fallback */
            fallback?: boolean | null;
            /** Model */
            model?: string | null;
            /** Prompt */
            prompt: string;
            /** Provider */
            provider?: ("claude_code" | "codex" | "opencode") | null;
            /**
             * Requires
             * @default []
             */
            requires: ("text_deltas" | "approvals" | "interrupt" | "resume" | "usage" | "cost" | "shared_process" | "approval_edits" | "model_choice" | "fork")[];
            retry?: components["schemas"]["RetryPolicyIn"] | null;
            /** Scenario */
            scenario?: string | null;
            /** Strategy */
            strategy?: ("ordered" | "lowest_latency" | "lowest_cost" | "balanced" | "round_robin" | "least_loaded") | null;
            /** Workspace */
            workspace: string;
        };
        /** RunResult */
        RunResult: {
            /** Attempts */
            attempts: number;
            error: components["schemas"]["TurnError"] | null;
            /** Final Text */
            final_text: string | null;
            /** Provider */
            provider: string;
            /** Session Id */
            session_id: string;
            /**
             * Status
             * @enum {string}
             */
            status: "queued" | "running" | "retrying" | "completed" | "failed" | "interrupted";
            /** Switches */
            switches: components["schemas"]["ProviderSwitch"][];
            /** Turn Id */
            turn_id: string;
            usage: components["schemas"]["Usage"] | null;
        };
        /**
         * SandboxPublic
         * @description What the provider's agent processes can see (``sandbox.mode``).
         */
        SandboxPublic: {
            /**
             * Mode
             * @enum {string}
             */
            mode: "bwrap" | "none";
            /** Reason */
            reason: string;
        };
        /** Selection */
        Selection: {
            /**
             * Fallback
             * @default false
             */
            fallback: boolean;
            /**
             * Reason
             * @enum {string}
             */
            reason: "explicit" | "scenario" | "default" | "fallback";
            /**
             * Requires
             * @default []
             */
            requires: string[];
            /** Scenario */
            scenario?: string | null;
            /**
             * Scores
             * @default []
             */
            scores: components["schemas"]["CandidateScore"][];
            /**
             * Skipped
             * @default []
             */
            skipped: components["schemas"]["SkippedCandidate"][];
            /**
             * Strategy
             * @default ordered
             * @enum {string}
             */
            strategy: "ordered" | "lowest_latency" | "lowest_cost" | "balanced" | "round_robin" | "least_loaded";
        };
        /**
         * SessionBudgetPublic
         * @description The session's own budget, what its ended turns used of it and what is left.
         */
        SessionBudgetPublic: {
            left: components["schemas"]["BudgetAmounts"];
            /** Max Cost Usd */
            max_cost_usd?: number | null;
            /** Max Tokens */
            max_tokens?: number | null;
            /** Reached */
            reached: boolean;
            used: components["schemas"]["BudgetAmounts"];
        };
        /** SessionClosed */
        SessionClosed: {
            /** Kept Branch */
            kept_branch?: string | null;
            /** Reason */
            reason: string;
        };
        /** SessionClosedEvent */
        SessionClosedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["SessionClosed"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "session.closed";
        };
        /**
         * SessionConfigure
         * @description Change a session's model, approval mode or provider (at least one).
         */
        SessionConfigure: {
            /**
             * Approval Mode
             * @enum {string}
             */
            approval_mode?: "ask" | "auto_edits" | "allow_all" | "read_only";
            /** Model */
            model?: string;
            /** Provider */
            provider?: string | ("claude_code" | "codex" | "opencode" | "acp:gemini" | "acp:copilot" | "acp:qwen" | "acp:codebuddy" | "acp:claude" | "acp:codex" | "acp:opencode") | unknown;
        };
        /**
         * SessionConfigured
         * @description The session's model, approval mode or provider changed between turns: each field is
         *     its value now (changed or not); its next turn runs with them.
         */
        SessionConfigured: {
            /**
             * Approval Mode
             * @enum {string}
             */
            approval_mode: "ask" | "auto_edits" | "allow_all" | "read_only";
            /** By */
            by: string;
            /** Model */
            model: string | null;
            /** Provider */
            provider: string;
        };
        /** SessionConfiguredEvent */
        SessionConfiguredEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["SessionConfigured"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "session.configured";
        };
        /**
         * SessionCreate
         * @description A session in ``workspace`` (a directory), or in a Git worktree of its own of
         *     ``repository`` (exactly one of the two).
         */
        SessionCreate: {
            /** Approval Mode */
            approval_mode?: ("ask" | "auto_edits" | "allow_all" | "read_only") | null;
            /** Branch */
            branch?: string | null;
            budget?: components["schemas"]["BudgetIn"] | null;
            /** Fallback */
            fallback?: boolean | null;
            /** Metadata */
            metadata?: {
                [key: string]: components["schemas"]["JsonValue"];
            } | null;
            /** Model */
            model?: string | null;
            /** Provider */
            provider?: ("claude_code" | "codex" | "opencode") | null;
            /** Ref */
            ref?: string | null;
            /** Repository */
            repository?: string | null;
            /**
             * Requires
             * @default []
             */
            requires: ("text_deltas" | "approvals" | "interrupt" | "resume" | "usage" | "cost" | "shared_process" | "approval_edits" | "model_choice" | "fork")[];
            retry?: components["schemas"]["RetryPolicyIn"] | null;
            /** Scenario */
            scenario?: string | null;
            /** Strategy */
            strategy?: ("ordered" | "lowest_latency" | "lowest_cost" | "balanced" | "round_robin" | "least_loaded") | null;
            /** Workspace */
            workspace?: string | null;
        };
        /** SessionCreated */
        SessionCreated: {
            /** Approval Mode */
            approval_mode: string;
            /** Base */
            base?: string | null;
            /** Branch */
            branch?: string | null;
            /** Model */
            model: string | null;
            /** Provider */
            provider: string;
            /** Repository */
            repository?: string | null;
            /** Workspace */
            workspace: string;
        };
        /** SessionCreatedEvent */
        SessionCreatedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["SessionCreated"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "session.created";
        };
        /** SessionForkCreate */
        SessionForkCreate: {
            /** At Turn */
            at_turn?: string | null;
        };
        /**
         * SessionForked
         * @description A session was forked: told on the session forked (``parent_id``) and on the new one
         *     (``child_id``), with the same data.
         */
        SessionForked: {
            /** At Turn */
            at_turn: string;
            /** Child Id */
            child_id: string;
            /**
             * Conversation
             * @enum {string}
             */
            conversation: "native" | "handoff";
            handoff?: components["schemas"]["HandoffSize"] | null;
            /** Parent Id */
            parent_id: string;
            /** Turn Number */
            turn_number: number;
        };
        /** SessionForkedEvent */
        SessionForkedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["SessionForked"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "session.forked";
        };
        /** SessionList */
        SessionList: {
            /** Sessions */
            sessions: components["schemas"]["SessionPublic"][];
        };
        /** SessionProviderSelected */
        SessionProviderSelected: {
            /** Provider */
            provider: string;
            /**
             * Reason
             * @enum {string}
             */
            reason: "explicit" | "scenario" | "default" | "fallback";
            /**
             * Scores
             * @default []
             */
            scores: components["schemas"]["CandidateScore"][];
            /**
             * Skipped
             * @default []
             */
            skipped: components["schemas"]["SkippedProvider"][];
            /**
             * Strategy
             * @default ordered
             * @enum {string}
             */
            strategy: "ordered" | "lowest_latency" | "lowest_cost" | "balanced" | "round_robin" | "least_loaded";
        };
        /** SessionProviderSelectedEvent */
        SessionProviderSelectedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["SessionProviderSelected"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "session.provider_selected";
        };
        /** SessionPublic */
        SessionPublic: {
            /**
             * Approval Mode
             * @enum {string}
             */
            approval_mode: "ask" | "auto_edits" | "allow_all" | "read_only";
            /** Base */
            base?: string | null;
            /** Branch */
            branch?: string | null;
            budget?: components["schemas"]["SessionBudgetPublic"] | null;
            /** Closed At */
            closed_at?: string | null;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Forked At */
            forked_at?: string | null;
            /** Forked From */
            forked_from?: string | null;
            /** Id */
            id: string;
            /** Last Seq */
            last_seq: number;
            /** Metadata */
            metadata?: {
                [key: string]: components["schemas"]["JsonValue"];
            } | null;
            /** Model */
            model: string | null;
            /** Owner */
            owner?: string | null;
            process?: components["schemas"]["ProcessPublic"] | null;
            /** Provider */
            provider: string;
            /** Repository */
            repository?: string | null;
            selection: components["schemas"]["Selection"] | null;
            /**
             * Status
             * @enum {string}
             */
            status: "idle" | "running" | "awaiting_approval" | "retrying" | "closed" | "failed";
            /** Thread Id */
            thread_id: string | null;
            /** Title */
            title?: string | null;
            /**
             * Updated At
             * Format: date-time
             */
            updated_at: string;
            usage: components["schemas"]["UsageTotalsPublic"];
            /** Workspace */
            workspace: string;
        };
        /**
         * SessionReverted
         * @description The workspace's files were put back as they were when ``to_turn`` started; the
         *     agent's next prompt is told so.
         */
        SessionReverted: {
            /** By */
            by: string;
            changes: components["schemas"]["ChangesSummary"];
            /** Files */
            files: components["schemas"]["ChangedFile"][];
            /** To Turn */
            to_turn: string;
            /** Turn Number */
            turn_number: number;
        };
        /** SessionRevertedEvent */
        SessionRevertedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["SessionReverted"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "session.reverted";
        };
        /** SessionThreadBound */
        SessionThreadBound: {
            /** Thread Id */
            thread_id: string;
        };
        /** SessionThreadBoundEvent */
        SessionThreadBoundEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["SessionThreadBound"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "session.thread_bound";
        };
        /** SkippedCandidate */
        SkippedCandidate: {
            /** Provider */
            provider: string;
            /** Reason */
            reason: string;
        };
        /** SkippedProvider */
        SkippedProvider: {
            /** Provider */
            provider: string;
            /** Reason */
            reason: string;
        };
        /** ToolCompleted */
        ToolCompleted: {
            /** Exit Code */
            exit_code?: number | null;
            /** Output */
            output?: string | null;
            /**
             * Status
             * @enum {string}
             */
            status: "completed" | "failed" | "denied";
            /** Tool Id */
            tool_id: string;
        };
        /** ToolCompletedEvent */
        ToolCompletedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["ToolCompleted"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "tool.completed";
        };
        /**
         * ToolOutput
         * @description Text the CLI streamed for this item: one delta as printed, or several that came
         *     within ``server.coalesce_deltas_ms`` of each other, joined.
         */
        ToolOutput: {
            /** Text */
            text: string;
            /** Tool Id */
            tool_id: string;
        };
        /** ToolOutputEvent */
        ToolOutputEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["ToolOutput"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "tool.output";
        };
        /** ToolStarted */
        ToolStarted: {
            /** Input */
            input: {
                [key: string]: components["schemas"]["JsonValue"];
            };
            /**
             * Kind
             * @enum {string}
             */
            kind: "command" | "file_change" | "mcp" | "web_search" | "other";
            /** Name */
            name: string;
            /** Tool Id */
            tool_id: string;
        };
        /** ToolStartedEvent */
        ToolStartedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["ToolStarted"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "tool.started";
        };
        /** TurnCompleted */
        TurnCompleted: {
            changes?: components["schemas"]["ChangesSummary"] | null;
            /** Final Text */
            final_text: string;
            /** Stop Reason */
            stop_reason?: string | null;
            usage?: components["schemas"]["Usage"] | null;
        };
        /** TurnCompletedEvent */
        TurnCompletedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["TurnCompleted"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "turn.completed";
        };
        /** TurnCreate */
        TurnCreate: {
            /** Prompt */
            prompt: string;
            retry?: components["schemas"]["RetryPolicyIn"] | null;
        };
        /**
         * TurnError
         * @description Why a turn failed, in the shared failure taxonomy.
         */
        TurnError: {
            /** Exit Code */
            exit_code?: number | null;
            /**
             * Kind
             * @enum {string}
             */
            kind: "rate_limited" | "overloaded" | "server_error" | "network" | "idle_timeout" | "auth" | "invalid_request" | "context_lost" | "cli_missing" | "cli_crashed" | "interrupted" | "usage_limit" | "agent_error" | "resource_limit" | "budget_exceeded" | "unknown";
            /** Message */
            message: string;
            /** Provider */
            provider?: string | null;
            /** Reason */
            reason?: string | null;
            /** Resets At */
            resets_at?: string | null;
            /**
             * Retryable
             * @default false
             */
            retryable: boolean;
            /** Stderr Tail */
            stderr_tail?: string | null;
        };
        /** TurnFailed */
        TurnFailed: {
            error: components["schemas"]["TurnError"];
        };
        /** TurnFailedEvent */
        TurnFailedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["TurnFailed"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "turn.failed";
        };
        /** TurnInterrupted */
        TurnInterrupted: {
            /** Reason */
            reason: string;
        };
        /** TurnInterruptedEvent */
        TurnInterruptedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["TurnInterrupted"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "turn.interrupted";
        };
        /** TurnList */
        TurnList: {
            /** Turns */
            turns: components["schemas"]["TurnPublic"][];
        };
        /** TurnPublic */
        TurnPublic: {
            /** Attempts */
            attempts: number;
            /** Changes */
            changes?: string | null;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            error?: components["schemas"]["TurnError"] | null;
            /** Final Text */
            final_text?: string | null;
            /** Finished At */
            finished_at?: string | null;
            /** Id */
            id: string;
            /** Number */
            number: number;
            /** Prompt */
            prompt: string;
            /** Provider */
            provider: string;
            /** Resume At */
            resume_at?: string | null;
            retry?: components["schemas"]["RetryPolicyPublic"] | null;
            /** Session Id */
            session_id: string;
            /** Started At */
            started_at?: string | null;
            /**
             * Status
             * @enum {string}
             */
            status: "queued" | "running" | "retrying" | "completed" | "failed" | "interrupted";
            usage?: components["schemas"]["Usage"] | null;
        };
        /** TurnStarted */
        TurnStarted: {
            /** Prompt */
            prompt: string;
        };
        /** TurnStartedEvent */
        TurnStartedEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["TurnStarted"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "turn.started";
        };
        /**
         * Usage
         * @description Token counts of one turn, and its cost when the CLI reports one.
         */
        Usage: {
            /**
             * Cache Creation Input Tokens
             * @default 0
             */
            cache_creation_input_tokens: number;
            /**
             * Cached Input Tokens
             * @default 0
             */
            cached_input_tokens: number;
            /** Cost Usd */
            cost_usd?: number | null;
            /**
             * Input Tokens
             * @default 0
             */
            input_tokens: number;
            /**
             * Output Tokens
             * @default 0
             */
            output_tokens: number;
        };
        /** UsageEvent */
        UsageEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["UsageReported"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "usage";
        };
        /** UsageGroupPublic */
        UsageGroupPublic: {
            /** Key */
            key: string | null;
            /** Model */
            model: string | null;
            /** Provider */
            provider: string;
            usage: components["schemas"]["UsageTotalsPublic"];
        };
        /**
         * UsageReport
         * @description Usage of the turns that ended in ``[from, to)``, by key, provider and model.
         */
        UsageReport: {
            /**
             * Budgets
             * @default []
             */
            budgets: components["schemas"]["KeyBudgetPublic"][];
            /**
             * From
             * Format: date-time
             */
            from: string;
            /** Groups */
            groups: components["schemas"]["UsageGroupPublic"][];
            /**
             * To
             * Format: date-time
             */
            to: string;
            total: components["schemas"]["UsageTotalsPublic"];
        };
        /** UsageReported */
        UsageReported: {
            usage: components["schemas"]["Usage"];
        };
        /**
         * UsageTotalsPublic
         * @description Usage summed over ended turns, each as its final attempt reported it.
         */
        UsageTotalsPublic: {
            /**
             * Cache Creation Input Tokens
             * @default 0
             */
            cache_creation_input_tokens: number;
            /**
             * Cached Input Tokens
             * @default 0
             */
            cached_input_tokens: number;
            /** Cost Usd */
            cost_usd?: number | null;
            /**
             * Input Tokens
             * @default 0
             */
            input_tokens: number;
            /**
             * Output Tokens
             * @default 0
             */
            output_tokens: number;
            /**
             * Turns
             * @default 0
             */
            turns: number;
        };
        /**
         * ValidationProblem
         * @description A 422 problem; ``errors`` lists each failing field when the request did not match
         *     the schema (``validation_failed``), and is absent when a well-formed value was refused.
         */
        ValidationProblem: {
            /** Detail */
            detail: string;
            /**
             * Errors
             * @default []
             */
            errors: components["schemas"]["FieldProblem"][];
            /** Status */
            status: number;
            /** Title */
            title: string;
            /** Type */
            type: string;
        } & {
            [key: string]: unknown;
        };
        /** Warning */
        Warning: {
            /** Code */
            code?: string | null;
            /** Message */
            message: string;
        };
        /** WarningEvent */
        WarningEvent: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt?: number | null;
            data: components["schemas"]["Warning"];
            /** Provider */
            provider?: string | null;
            /** Seq */
            seq: number;
            /** Session Id */
            session_id: string;
            /** Turn Id */
            turn_id?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            type: "warning";
        };
        /** WebhookDeliveryList */
        WebhookDeliveryList: {
            /** Deliveries */
            deliveries: components["schemas"]["WebhookDeliveryPublic"][];
        };
        /**
         * WebhookDeliveryPublic
         * @description One message to one endpoint: its attempts so far and how they went.
         */
        WebhookDeliveryPublic: {
            /** Attempts */
            attempts: number;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Endpoint Id */
            endpoint_id: string;
            /** Finished At */
            finished_at: string | null;
            /** Id */
            id: string;
            /** Last Error */
            last_error: string | null;
            /** Last Status Code */
            last_status_code: number | null;
            /** Message Id */
            message_id: string;
            /** Next Attempt In S */
            next_attempt_in_s: number | null;
            /** Sent By */
            sent_by: string | null;
            /** Session Id */
            session_id: string | null;
            /**
             * Status
             * @enum {string}
             */
            status: "pending" | "succeeded" | "failed" | "cancelled";
            /** Type */
            type: string;
            /**
             * Updated At
             * Format: date-time
             */
            updated_at: string;
        };
        /** WebhookEndpointCreate */
        WebhookEndpointCreate: {
            /**
             * Description
             * @default
             */
            description: string;
            /** Events */
            events: ("session.idle" | "session.closed" | "turn.completed" | "turn.failed" | "turn.interrupted" | "approval.requested" | "approval.resolved" | "question.asked" | "question.resolved" | "provider.switched" | "budget.reached")[];
            /**
             * Keys
             * @description Only sessions created by these keys (their names); unset: every key's
             */
            keys?: string[] | null;
            /**
             * Secret
             * @description `whsec_` and the base64 of 24 to 64 random bytes; unset: the gateway makes one and returns it in this response only
             */
            secret?: string | null;
            /**
             * Url
             * @description Where deliveries are POSTed: `https://…`, or `http://` to a host of `webhooks.allow_http_hosts` (with `webhooks.allowed_hosts` set, on one of them); no user info, no fragment
             */
            url: string;
        };
        /** WebhookEndpointCreated */
        WebhookEndpointCreated: {
            /** Created At */
            created_at: string | null;
            /** Description */
            description: string;
            /** Disabled Reason */
            disabled_reason: string | null;
            /** Enabled */
            enabled: boolean;
            /** Events */
            events: ("session.idle" | "session.closed" | "turn.completed" | "turn.failed" | "turn.interrupted" | "approval.requested" | "approval.resolved" | "question.asked" | "question.resolved" | "provider.switched" | "budget.reached")[];
            /** Id */
            id: string;
            /** Keys */
            keys: string[] | null;
            /** Secret */
            secret: string | null;
            /**
             * Source
             * @enum {string}
             */
            source: "config" | "api";
            /** Url */
            url: string;
        };
        /** WebhookEndpointList */
        WebhookEndpointList: {
            /** Endpoints */
            endpoints: components["schemas"]["WebhookEndpointPublic"][];
        };
        /**
         * WebhookEndpointPublic
         * @description An endpoint; its secrets are never shown (but once, made by the gateway).
         */
        WebhookEndpointPublic: {
            /** Created At */
            created_at: string | null;
            /** Description */
            description: string;
            /** Disabled Reason */
            disabled_reason: string | null;
            /** Enabled */
            enabled: boolean;
            /** Events */
            events: ("session.idle" | "session.closed" | "turn.completed" | "turn.failed" | "turn.interrupted" | "approval.requested" | "approval.resolved" | "question.asked" | "question.resolved" | "provider.switched" | "budget.reached")[];
            /** Id */
            id: string;
            /** Keys */
            keys: string[] | null;
            /**
             * Source
             * @enum {string}
             */
            source: "config" | "api";
            /** Url */
            url: string;
        };
        /** WebhookSecretRotate */
        WebhookSecretRotate: {
            /**
             * Keep Previous
             * @description Keep signing with the secrets the endpoint had (the newest two) until the receiver has the new one; a later rotation with `false` drops them
             * @default true
             */
            keep_previous: boolean;
            /**
             * Secret
             * @description The new secret (`whsec_` and the base64 of 24 to 64 random bytes); unset: the gateway makes one and returns it in this response only
             */
            secret?: string | null;
        };
        /** WebhookSecretRotated */
        WebhookSecretRotated: {
            /** Id */
            id: string;
            /** Secret */
            secret: string | null;
            /** Signing Secrets */
            signing_secrets: number;
        };
        /** WebhookTestAccepted */
        WebhookTestAccepted: {
            /** Message Id */
            message_id: string;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    healthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Liveness"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getMetrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Prometheus text exposition format */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain; version=1.0.0; charset=utf-8": string;
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key is not an admin key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    readyz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Readiness"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not ready: the database does not answer, Redis does not answer (with `cluster.redis_url`), or neither the default provider nor any of its fallbacks is available (one that needs a login is not); `reasons` says why */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Readiness"];
                };
            };
        };
    };
    listProviders: {
        parameters: {
            query?: {
                /** @description Probe now instead of using the cached result */
                fresh?: boolean;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ProviderList"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getProvider: {
        parameters: {
            query?: {
                /** @description Probe now instead of using the cached result */
                fresh?: boolean;
            };
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ProviderPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No provider of that name is configured */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    createRun: {
        parameters: {
            query?: never;
            header?: {
                /** @description Send the request again with the same key (1 to 255 visible ASCII characters, a UUID say) to get its first answer instead of a second effect: kept 24 hours per API key. A copy sent while the first is answered gets 409 `idempotency_key_in_use` (Retry-After); the key used with another body, 422 `idempotency_key_reused`. A kept answer carries `Idempotent-Replayed: true`. */
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RunCreate"];
            };
        };
        responses: {
            /** @description The result, or with `Accept: text/event-stream` the run's events as SSE, like `GET /v1/sessions/{id}/events` (the stream ends after the run's last event, or with an `evicted` or `shutdown` control frame) */
            200: {
                headers: {
                    /** @description `true` when this is the answer kept for the request's Idempotency-Key, sent again (absent otherwise) */
                    "Idempotent-Replayed"?: "true";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RunResult"];
                    "text/event-stream": string;
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description A run with this Idempotency-Key is still being answered (`idempotency_key_in_use`, see Retry-After) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Request body over server.max_body_bytes */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request: a workspace outside the roots or missing, an unknown provider or capability, an approval mode or retry strategy not enabled, a usage-limit wait above the gateway's ceiling; or an Idempotency-Key used for another request (`idempotency_key_reused`) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description The key's budget for this day or month is spent (`key_budget_exceeded`), creation rate or open-session cap of this key reached, this key's share of the live processes or (SSE) subscribers (`key_share_exceeded`), (SSE) the session's subscriber cap, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No provider available, every live-process or (SSE) subscriber slot is taken, or the database cannot be written now (see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listSessions: {
        parameters: {
            query?: {
                status?: "idle" | "running" | "awaiting_approval" | "retrying" | "closed" | "failed";
                limit?: number;
                /** @description Only sessions created before this time */
                before?: string;
                /** @description Only sessions of this provider */
                provider?: string;
                /** @description Only sessions matching every word of this: each word found, case-insensitive, in the title, id, workspace, repository or branch */
                q?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionList"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    createSession: {
        parameters: {
            query?: never;
            header?: {
                /** @description Send the request again with the same key (1 to 255 visible ASCII characters, a UUID say) to get its first answer instead of a second effect: kept 24 hours per API key. A copy sent while the first is answered gets 409 `idempotency_key_in_use` (Retry-After); the key used with another body, 422 `idempotency_key_reused`. A kept answer carries `Idempotent-Replayed: true`. */
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SessionCreate"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    /** @description `true` when this is the answer kept for the request's Idempotency-Key, sent again (absent otherwise) */
                    "Idempotent-Replayed"?: "true";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The `branch` asked for exists in the repository (`branch_exists`), or a request with this Idempotency-Key is still being answered (`idempotency_key_in_use`, see Retry-After) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Request body over server.max_body_bytes */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request: a workspace outside the roots or missing, both or neither of `workspace` and `repository`, a repository outside the roots or not a Git repository, a `ref` that names no commit or an invalid `branch` (`repository_rejected`), an unknown provider or capability, an approval mode or retry strategy not enabled, a usage-limit wait above the gateway's ceiling (`ceiling_s`); or an Idempotency-Key used for another request (`idempotency_key_reused`) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description Creation rate or open-session cap of this key reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No provider available (`candidates` says why for each), or the database cannot be written now */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    configureSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SessionConfigure"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The session is running a turn (`turn_in_progress`), is being reverted, forked or configured, or is closed (`session_closed`); `provider` after the session's first turn (`provider_fixed`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Request body over server.max_body_bytes */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request: no field, a null or unknown field, an approval mode not enabled or that the provider refuses as configured (`approval_mode_refused`), a `model` for a provider without `model_choice` or a `provider` without the session's required capabilities (`capabilities_unmet`), an unknown provider */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The provider named is disabled or unavailable (`candidates` says why), or the database cannot be written now */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listApprovals: {
        parameters: {
            query?: {
                status?: "pending" | "allowed" | "denied" | "expired" | "cancelled";
                limit?: number;
                /** @description Only approvals requested before this time */
                before?: string;
            };
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ApprovalList"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    respondApproval: {
        parameters: {
            query?: never;
            header?: {
                /** @description Send the request again with the same key (1 to 255 visible ASCII characters, a UUID say) to get its first answer instead of a second effect: kept 24 hours per API key. A copy sent while the first is answered gets 409 `idempotency_key_in_use` (Retry-After); the key used with another body, 422 `idempotency_key_reused`. A kept answer carries `Idempotent-Replayed: true`. */
                "Idempotency-Key"?: string;
            };
            path: {
                session_id: string;
                approval_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ApprovalRespond"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    /** @description `true` when this is the answer kept for the request's Idempotency-Key, sent again (absent otherwise) */
                    "Idempotent-Replayed"?: "true";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ApprovalPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session or approval */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The approval is no longer pending, or a request with this Idempotency-Key is still being answered (`idempotency_key_in_use`, see Retry-After) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Request body over server.max_body_bytes */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request, or edited input (`updated_input`) this gateway or provider does not take (the approval stays pending); or an Idempotency-Key used for another request (`idempotency_key_reused`) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getChanges: {
        parameters: {
            query?: {
                /** @description `start`, or a turn id: the state at its start */
                from?: string;
                /** @description `now`, or a turn id: the state at its end */
                to?: string;
                /** @description `patch`: `text/x-diff` with binary files, for `git apply` */
                format?: "json" | "patch";
            };
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The changed files and their diff (JSON), or with `format=patch` the patch `git apply` takes on the `from` state */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChangesPublic"];
                    "text/x-diff": string;
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours), or no such turn in it (`from`, `to`) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The state asked for was not recorded (`snapshot_unavailable`: snapshots off, the workspace over their cap then, no turn yet, or the `to` turn still running) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `from` after `to`, an unknown parameter, or the workspace now over the snapshot cap (`workspace_too_large`, for `to=now`) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getEvents: {
        parameters: {
            query?: {
                /** @description Return events with seq > after */
                after?: number;
                limit?: number;
            };
            header?: {
                /** @description Like `after`; it wins when both are sent */
                "Last-Event-ID"?: number;
            };
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A JSON page of events, or with `Accept: text/event-stream` an SSE stream whose messages carry one `Event` each */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventPage"];
                    "text/event-stream": string;
                };
            };
            /** @description The session is closed and the cursor is at its last event */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The cursor is older than the events kept (`first_seq` is the oldest kept one) */
            410: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request, or a cursor past the session's newest event */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description The session has its maximum of subscribers, this key holds its share of the gateway's subscribers (`key_share_exceeded`), or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The gateway has its maximum of subscribers (for a key that is not an admin key: all but the admin reserve), or the database cannot be read now (see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    forkSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SessionForkCreate"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours), or no such turn in it (`at_turn`) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The session is running a turn (`turn_in_progress`), is already being forked (`fork_in_progress`) or is closed; `at_turn` did not complete, or the session has no completed turn (`turn_not_forkable`); the files after `at_turn` were not recorded (`snapshot_unavailable`); or the fork's branch exists (`branch_exists`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Request body over server.max_body_bytes */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The session's workspace is gone, or its files cannot be copied (`workspace_rejected`) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description Creation rate or open-session cap of this key reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    interruptTurn: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InterruptAccepted"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No turn is running */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listQuestions: {
        parameters: {
            query?: {
                status?: "pending" | "answered" | "expired" | "cancelled";
                limit?: number;
                /** @description Only questions asked before this time */
                before?: string;
            };
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["QuestionList"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    answerQuestion: {
        parameters: {
            query?: never;
            header?: {
                /** @description Send the request again with the same key (1 to 255 visible ASCII characters, a UUID say) to get its first answer instead of a second effect: kept 24 hours per API key. A copy sent while the first is answered gets 409 `idempotency_key_in_use` (Retry-After); the key used with another body, 422 `idempotency_key_reused`. A kept answer carries `Idempotent-Replayed: true`. */
                "Idempotency-Key"?: string;
            };
            path: {
                session_id: string;
                question_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["QuestionReply"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    /** @description `true` when this is the answer kept for the request's Idempotency-Key, sent again (absent otherwise) */
                    "Idempotent-Replayed"?: "true";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["QuestionPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session or question */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The question is no longer pending (answered, expired or withdrawn), or a request with this Idempotency-Key is still being answered (`idempotency_key_in_use`, see Retry-After) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Request body over server.max_body_bytes */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Answers that do not fit the questions: not one per question, a label that was not offered, several labels for a single choice, text where only labels are taken, or an empty answer (the question stays pending); or an Idempotency-Key used for another request (`idempotency_key_reused`) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    revertSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RevertCreate"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RevertPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours), or no such turn in it (`to_turn`) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description A turn is running (`turn_id` names it), a revert is already running, the session is closed, or the turn's start was not recorded (`snapshot_unavailable`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Request body over server.max_body_bytes */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The workspace now over the snapshot cap (`workspace_too_large`) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listTurns: {
        parameters: {
            query?: {
                limit?: number;
                /** @description Only turns numbered below this one */
                before?: number;
            };
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TurnList"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    createTurn: {
        parameters: {
            query?: never;
            header?: {
                /** @description Send the request again with the same key (1 to 255 visible ASCII characters, a UUID say) to get its first answer instead of a second effect: kept 24 hours per API key. A copy sent while the first is answered gets 409 `idempotency_key_in_use` (Retry-After); the key used with another body, 422 `idempotency_key_reused`. A kept answer carries `Idempotent-Replayed: true`. */
                "Idempotency-Key"?: string;
            };
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["TurnCreate"];
            };
        };
        responses: {
            /** @description Successful Response */
            202: {
                headers: {
                    /** @description `true` when this is the answer kept for the request's Idempotency-Key, sent again (absent otherwise) */
                    "Idempotent-Replayed"?: "true";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TurnPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The session's budget is spent (`budget_exceeded`: `budget`, `measure`, `limit`, `used`); it does not reset */
            402: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session (or not yours) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description A turn is already running (`turn_id` names it), the session is closed, or a request with this Idempotency-Key is still being answered (`idempotency_key_in_use`, see Retry-After) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Request body over server.max_body_bytes */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request, or a usage-limit wait above the gateway's ceiling (`ceiling_s`); or an Idempotency-Key used for another request (`idempotency_key_reused`) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description The key's budget for this day or month is spent (`key_budget_exceeded`, `resets_at`), the session's owner holds its share of the live processes (`key_share_exceeded`), or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The provider is disabled, every live-process slot is busy (for a key that is not an admin key: all but the admin reserve), or the database cannot be written now */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getTurn: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
                turn_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TurnPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key may not do this */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session or turn */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be written now (`storage_unavailable`, see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getUsage: {
        parameters: {
            query?: {
                /** @description Start of the range, inclusive (default: 30 days before `to`) */
                from?: string;
                /** @description End of the range, exclusive (default: now) */
                to?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UsageReport"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key is not an admin key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `from` or `to` is not an RFC 3339 date-time with a time zone, or `from` is after `to` (`from` = `to` is an empty range: zero totals) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be read now */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listWebhooks: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookEndpointList"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key is not an admin key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Webhooks are off on this gateway (`webhooks.enabled = false`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be used now (see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    createWebhook: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["WebhookEndpointCreate"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookEndpointCreated"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key is not an admin key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Webhooks are off on this gateway (`webhooks.enabled = false`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Request body over server.max_body_bytes */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request: a URL that is not `https` (nor `http` to a host of `webhooks.allow_http_hosts`), on a host outside `webhooks.allowed_hosts`, with user info or a fragment; a secret that is not `whsec_` and the base64 of 24 to 64 bytes; `keys` naming no key of this gateway */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be used now (see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getWebhook: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                webhook_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookEndpointPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key is not an admin key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such webhook endpoint */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Webhooks are off on this gateway (`webhooks.enabled = false`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be used now (see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listWebhookDeliveries: {
        parameters: {
            query?: {
                status?: "pending" | "succeeded" | "failed" | "cancelled";
                limit?: number;
                /** @description Only deliveries made before this time */
                before?: string;
            };
            header?: never;
            path: {
                webhook_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookDeliveryList"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key is not an admin key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such webhook endpoint */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Webhooks are off on this gateway (`webhooks.enabled = false`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be used now (see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    disableWebhook: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                webhook_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookEndpointPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key is not an admin key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such webhook endpoint */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The endpoint comes from the configuration (change it there), or webhooks are off */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be used now (see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    enableWebhook: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                webhook_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookEndpointPublic"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key is not an admin key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such webhook endpoint */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The endpoint comes from the configuration (change it there), or webhooks are off */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be used now (see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    rotateWebhookSecret: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                webhook_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["WebhookSecretRotate"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookSecretRotated"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key is not an admin key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such webhook endpoint */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The endpoint comes from the configuration (rotate it there: `secret`, `previous_secrets`), or webhooks are off */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Request body over server.max_body_bytes */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request: a secret that is not `whsec_` and the base64 of 24 to 64 bytes */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be used now (see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    testWebhook: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                webhook_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookTestAccepted"];
                };
            };
            /** @description Missing or wrong key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Host or Origin not allowed, or the key is not an admin key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such webhook endpoint */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The endpoint is disabled, or webhooks are off */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["ValidationProblem"];
                };
            };
            /** @description A rate or subscriber limit was reached, or too many failed authentications from this address (see Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The database cannot be used now (see Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
}
