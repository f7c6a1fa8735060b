/**
 * Every migration, in order. Ids are never reused or reordered, and a new
 * migration always takes an id ABOVE the highest one here (whatever
 * capability it belongs to): Effect's migrator only runs ids
 * greater than the latest applied one, so a new id in a gap below it would
 * be silently skipped on every database that is already migrated. The
 * ranges below were how the first capabilities were built in parallel on
 * empty databases; they are history, not a place to add to.
 *   0001-0010 foundation and shared pieces, 0100 feedback, 0200 approvals,
 *   0300 webhooks, 0400 telemetry.
 */
import type { Effect } from "effect"
import { Migrator, type SqlClient } from "effect/sql"
import m0001 from "./0001_identity.ts"
import m0002 from "./0002_tasks.ts"
import m0003 from "./0003_shared.ts"
import m0010 from "./0010_deliveries.ts"
import m0100 from "./0100_feedback.ts"
import m0200 from "./0200_agents_approvals.ts"
import m0300 from "./0300_notifications.ts"
import m0301 from "./0301_delivery_claim_index.ts"
import m0400 from "./0400_telemetry.ts"
import m0401 from "./0401_delivery_counts.ts"
import m0540 from "./0540_metrics_indexes.ts"
import m0541 from "./0541_console.ts"
import m0542 from "./0542_retention_indexes.ts"
import m0550 from "./0550_credentials_version.ts"
import m0560 from "./0560_event_labels.ts"
import m0570 from "./0570_delivery_write_costs.ts"
import m0600 from "./0600_delivery_enqueue_costs.ts"
import m0601 from "./0601_delivery_ordering.ts"
import m0620 from "./0620_governed_steps.ts"
import m0630 from "./0630_datasets_by_reference.ts"
import m0631 from "./0631_org_quotas.ts"
import m0632 from "./0632_api_key_creator.ts"
import m0640 from "./0640_receivers.ts"
import m0650 from "./0650_decision_reasons.ts"
import m0651 from "./0651_approval_mail_links.ts"
import m0660 from "./0660_revoked_keys_index.ts"
import m0670 from "./0670_delivery_log.ts"
import m0675 from "./0675_ordered_scans.ts"
import m0676 from "./0676_record_probes.ts"
import m0680 from "./0680_schema_versions.ts"
import m0681 from "./0681_telemetry_encoding.ts"
import m0690 from "./0690_dataset_export_digest.ts"
import m0710 from "./0710_endpoint_headers_rate.ts"
import m0720 from "./0720_dispatch_cursor.ts"
import m0740 from "./0740_step_lookup_plans.ts"
import m0780 from "./0780_reviewer_address_confirmation.ts"
import m0790 from "./0790_dataset_export_pages.ts"
import m0791 from "./0791_run_usage.ts"
import m0800 from "./0800_policy_rules.ts"
import m0810 from "./0810_approval_edits.ts"
import m0820 from "./0820_approval_votes.ts"
import m0830 from "./0830_reviewer_groups.ts"
import m0840 from "./0840_policy_versions.ts"
import m0850 from "./0850_reviewer_member_addresses.ts"
import m0860 from "./0860_escalation_chains.ts"
import m0870 from "./0870_endpoint_health.ts"
import m0890 from "./0890_one_person_one_vote.ts"
import m0920 from "./0920_idempotency_keys.ts"
import m0930 from "./0930_delivery_search.ts"
import m0940 from "./0940_endpoint_auth.ts"
import m0960 from "./0960_target_groups.ts"
import m0970 from "./0970_mcp_gateway.ts"
import m0980 from "./0980_export_lines.ts"
import m1000 from "./1000_delivery_targets_hot.ts"
import m1020 from "./1020_mcp_url_elicitation.ts"

/**
 * Every migration by its `id_name`, under the release of svc it first
 * shipped in. A new migration goes under the release being made (`VERSION`
 * in `src/api/Version.ts`); the database records each applied migration's
 * release, and a build older than that refuses to start (`../Migrations.ts`).
 */
export const migrationsByRelease = {
  "0.1.0": {
    "0001_identity": m0001,
    "0002_tasks": m0002,
    "0003_shared": m0003,
    "0010_deliveries": m0010,
    "0100_feedback": m0100,
    "0200_agents_approvals": m0200,
    "0300_notifications": m0300,
    "0301_delivery_claim_index": m0301,
    "0400_telemetry": m0400,
    "0401_delivery_counts": m0401,
    "0540_metrics_indexes": m0540,
    "0541_console": m0541,
    "0542_retention_indexes": m0542,
    "0550_credentials_version": m0550,
    "0560_event_labels": m0560,
    "0570_delivery_write_costs": m0570,
    "0600_delivery_enqueue_costs": m0600,
    "0601_delivery_ordering": m0601,
    "0620_governed_steps": m0620,
    "0630_datasets_by_reference": m0630,
    "0631_org_quotas": m0631,
    "0632_api_key_creator": m0632,
    "0640_receivers": m0640,
    "0650_decision_reasons": m0650,
    "0651_approval_mail_links": m0651,
    "0660_revoked_keys_index": m0660,
    "0670_delivery_log": m0670,
    "0675_ordered_scans": m0675,
    "0676_record_probes": m0676
  },
  "0.2.0": {
    "0680_schema_versions": m0680,
    "0681_telemetry_encoding": m0681,
    "0690_dataset_export_digest": m0690,
    "0710_endpoint_headers_rate": m0710,
    "0720_dispatch_cursor": m0720,
    "0740_step_lookup_plans": m0740,
    "0780_reviewer_address_confirmation": m0780,
    "0790_dataset_export_pages": m0790,
    "0791_run_usage": m0791,
    "0800_policy_rules": m0800,
    "0810_approval_edits": m0810,
    "0820_approval_votes": m0820,
    "0830_reviewer_groups": m0830,
    "0840_policy_versions": m0840,
    "0850_reviewer_member_addresses": m0850,
    "0860_escalation_chains": m0860,
    "0870_endpoint_health": m0870,
    "0890_one_person_one_vote": m0890,
    "0920_idempotency_keys": m0920,
    "0930_delivery_search": m0930,
    "0940_endpoint_auth": m0940,
    "0960_target_groups": m0960,
    "0970_mcp_gateway": m0970,
    "0980_export_lines": m0980,
    "1000_delivery_targets_hot": m1000,
    "1020_mcp_url_elicitation": m1020
  }
}

/** Every migration by its `id_name` (the studies in `bench/sql` apply some of them). */
export const migrationRecord: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = Object.assign(
  {},
  ...Object.values(migrationsByRelease)
)

/** The release each migration belongs to, by its `id_name`. */
export const releaseOf: ReadonlyMap<string, string> = new Map(
  Object.entries(migrationsByRelease).flatMap(([release, record]) =>
    Object.keys(record).map((key) => [key, release] as const)
  )
)

export const migrations = Migrator.fromRecord(migrationRecord)
