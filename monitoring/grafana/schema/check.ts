// The dashboard's JSON as Grafana's own schema types it (@grafana/schema's Dashboard), for
// scripts/check-grafana-dashboard.sh: that script writes dashboard.ts beside this file, the
// JSON as an object literal that `satisfies DashboardJson`, so tsc refuses a property the
// schema does not know (a typo), a value of the wrong type and a missing required field.
import type { Dashboard } from "@grafana/schema";

// Grafana's JSON spells its enums (FieldColorModeId, ThresholdsMode, MappingType, ...) as
// their string values, which TypeScript's enum types do not accept as such.
type Json<T> = T extends string
  ? `${T}`
  : T extends (infer U)[]
    ? Json<U>[]
    : T extends object
      ? { [K in keyof T]: Json<T[K]> }
      : T;

export type DashboardJson = Json<Dashboard>;
