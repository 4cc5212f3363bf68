import type { Role } from '../db/owners.ts';

/** Who is asking: the owner a token belongs to and the token's role. */
export interface Caller {
  ownerId: number;
  ownerName: string;
  role: Role;
}

/** The owner whose jobs the caller may see: its own, or (operators) every owner's. */
export function visibleOwner(caller: Caller): number | undefined {
  return caller.role === 'operator' ? undefined : caller.ownerId;
}
