// A route handler on the edge runtime: IDs drawn per request, as JSON strings.
import { Snowflake } from 'edgeleaf';

export const runtime = 'edge';

export async function GET() {
  const gen = new Snowflake({ workerId: 2 });
  const ids = await gen.nextIdsAsync(5); // a BigUint64Array (its own .map would give bigints back)
  return Response.json(Array.from(ids, String));
}
